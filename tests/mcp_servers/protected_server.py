"""An OAuth-protected MCP server and its authorization server in one process, built from the
`mcp` SDK's server auth pieces (RFC 9728 resource metadata, RFC 8414 metadata, dynamic client
registration, authorization code with PKCE S256 checked by the SDK, refresh, revocation).

Run: `python protected_server.py --port P [--lifetime SECONDS]` (127.0.0.1 only). Users log in
on `/login` with the password `<user>-pw`. Tools: `whoami` answers the user whose token the
call carried. Test hooks: `GET /admin/seen` lists every MCP request that reached the resource
(with its user: none before authorization); `POST /admin/revoke?user=U` revokes all of U's
tokens; `GET /admin/issued` counts the tokens issued by grant type, and the registrations.
With `--trust-idp PEM`, an RFC 8693 token exchange endpoint, `POST /exchange`: a client `gateway`
(secret `gw-secret`, Basic) exchanges a JWT of that identity provider (RS256, issuer
`https://idp.test`) for a token of its subject.
"""

from __future__ import annotations

import argparse
import secrets
import time
from typing import Any
from urllib.parse import urlencode

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response


class Provider:
    """In memory: clients, pending logins, codes, access and refresh tokens (rotating)."""

    def __init__(self, base: str, lifetime: int) -> None:
        self.base = base
        self.lifetime = lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued: dict[str, int] = {"authorization_code": 0, "refresh_token": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.issued["registrations"] = self.issued.get("registrations", 0) + 1

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        pending = secrets.token_urlsafe(16)
        self.pending[pending] = (client.client_id or "", params)
        return f"{self.base}/login?{urlencode({'pending': pending})}"

    def login(self, pending: str, user: str) -> str:
        client_id, params = self.pending.pop(pending)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=user,
        )
        query = {"code": code, **({"state": params.state} if params.state else {})}
        return f"{params.redirect_uri}?{urlencode(query)}"

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        found = self.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def _issue(self, client_id: str, scopes: list[str], subject: str | None, resource: str | None) -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        expires = int(time.time()) + self.lifetime
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, subject=subject, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, subject=subject, resource=resource
        )
        return OAuthToken(
            access_token=access, expires_in=self.lifetime, refresh_token=refresh, scope=" ".join(scopes) or None
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)  # once
        self.issued["authorization_code"] += 1
        return self._issue(
            authorization_code.client_id,
            authorization_code.scopes,
            authorization_code.subject,
            authorization_code.resource,
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:  # rotating: each is used once
            raise TokenError("invalid_grant", "refresh token already used")
        self.issued["refresh_token"] += 1
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.subject, None)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def revoke_user(self, user: str) -> int:
        gone = [t for t, a in self.access.items() if a.subject == user]
        gone += [t for t, r in self.refresh.items() if r.subject == user]
        for token in gone:
            self.access.pop(token, None)
            self.refresh.pop(token, None)
        return len(gone)


TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def exchanged(provider: Provider, form: Any, authorization: str, idp_key: str) -> Response:
    import base64

    import jwt

    if authorization != "Basic " + base64.b64encode(b"gateway:gw-secret").decode():
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    if form.get("grant_type") != TOKEN_EXCHANGE or not str(form.get("subject_token_type", "")).endswith(":jwt"):
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
    try:
        claims = jwt.decode(
            str(form.get("subject_token")),
            idp_key,
            algorithms=["RS256"],
            issuer="https://idp.test",
            options={"verify_aud": False},
        )
    except jwt.PyJWTError:
        return JSONResponse({"error": "invalid_grant"}, status_code=400)
    provider.issued["token_exchange"] = provider.issued.get("token_exchange", 0) + 1
    token = provider._issue("gateway", [], str(claims["sub"]), str(form.get("resource") or "") or None)
    body = token.model_dump(exclude_none=True)
    body.pop("refresh_token", None)
    body["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
    return JSONResponse(body)


def build(port: int, lifetime: int, idp_key: str | None = None) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = Provider(base, lifetime)
    seen: list[dict[str, Any]] = []
    server = MCPServer(
        "protected",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @server.tool()
    def whoami() -> str:
        """The user whose token this call carried."""
        token = get_access_token()
        user = None if token is None else token.subject
        seen.append({"tool": "whoami", "user": user})
        return f"you are {user}"

    @server.custom_route("/login", methods=["GET"])
    async def login_page(request: Request) -> Response:
        pending = request.query_params.get("pending", "")
        return HTMLResponse(
            f'<form method="post" action="/login"><input type="hidden" name="pending" value="{pending}">'
            '<input name="username"><input name="password" type="password"></form>'
        )

    @server.custom_route("/login", methods=["POST"])
    async def login(request: Request) -> Response:
        form = await request.form()
        pending, user, password = str(form.get("pending")), str(form.get("username")), str(form.get("password"))
        if password != f"{user}-pw" or pending not in provider.pending:
            return PlainTextResponse("bad login", status_code=401)
        return RedirectResponse(provider.login(pending, user), status_code=302)

    @server.custom_route("/admin/seen", methods=["GET"])
    async def admin_seen(request: Request) -> Response:
        return JSONResponse(seen)

    @server.custom_route("/admin/issued", methods=["GET"])
    async def admin_issued(request: Request) -> Response:
        return JSONResponse(provider.issued)

    @server.custom_route("/admin/revoke", methods=["POST"])
    async def admin_revoke(request: Request) -> Response:
        return JSONResponse({"revoked": provider.revoke_user(request.query_params.get("user", ""))})

    if idp_key is not None:
        key = idp_key

        @server.custom_route("/exchange", methods=["POST"])
        async def exchange(request: Request) -> Response:
            return exchanged(provider, await request.form(), request.headers.get("authorization", ""), key)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lifetime", type=int, default=3600)
    parser.add_argument("--trust-idp", metavar="PEM")
    args = parser.parse_args()
    idp_key = None
    if args.trust_idp:
        with open(args.trust_idp) as f:
            idp_key = f.read()
    server = build(args.port, args.lifetime, idp_key)
    server.run("streamable-http", host="127.0.0.1", port=args.port, streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
