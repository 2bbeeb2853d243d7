"""The gateway as an OAuth client of one upstream server (MCP authorization, 2025-11-25 on).

Discovery of the protected resource's metadata (RFC 9728: its well-known URLs, else the
`resource_metadata` of a 401's `WWW-Authenticate`) and of its authorization server (RFC 8414,
OpenID discovery); the client: one the operator registered (`clientId`/`clientSecret`), else
dynamic registration (RFC 7591); the authorization code grant with PKCE S256 and the `resource`
parameter (RFC 8707); refresh. The URL builders, metadata models and PKCE come from the `mcp`
SDK's client (`mcp.client.auth`); its `OAuthClientProvider` runs a whole flow inside one request,
which a server whose user authorizes minutes later, maybe through another replica, cannot use.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol
from urllib.parse import urlencode, urlparse

import httpx2
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
)
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata, OAuthToken, ProtectedResourceMetadata

from toolroute.errors import ToolExecutionError

HTTP_TIMEOUT = 15.0
CLIENT_NAME = "toolroute"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # RFC 8693
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"


class OAuthProblem(ToolExecutionError):
    """An authorization server or protected resource did not answer as the specification says."""


@dataclass(frozen=True)
class Client:
    client_id: str
    client_secret: str | None = None
    auth_method: str = "none"  # how the token endpoint authenticates it (RFC 7591)


@dataclass(frozen=True)
class Endpoints:
    """What discovery found for one server: where to send the user and to get tokens."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    resource: str
    client: Client
    scope: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Endpoints:
        return cls(**{**data, "client": Client(**data["client"])})


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str | None
    expires_at: float | None  # wall-clock seconds; None: the server said nothing

    def expired(self, skew: float = 0.0) -> bool:
        return self.expires_at is not None and time.time() + skew >= self.expires_at


def _same_issuer(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def http_client() -> httpx2.AsyncClient:
    # No redirects: a metadata or token URL that redirects is not followed (the SDK's rule too).
    return httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False)


async def _resource_metadata(http: httpx2.AsyncClient, server_url: str) -> ProtectedResourceMetadata:
    for url in build_protected_resource_metadata_discovery_urls(None, server_url):
        found = await handle_protected_resource_response(await http.send(create_oauth_metadata_request(url)))
        if found is not None:
            return found
    # No well-known document: a request without a token says where it is (RFC 9728, section 5.1).
    probe = await http.post(server_url, json={}, headers={"Accept": "application/json, text/event-stream"})
    hinted = extract_resource_metadata_from_www_auth(probe) if probe.status_code == 401 else None
    if hinted is not None:
        found = await handle_protected_resource_response(await http.send(create_oauth_metadata_request(hinted)))
        if found is not None:
            return found
    raise OAuthProblem(f"{server_url} publishes no OAuth protected resource metadata (RFC 9728)")


async def _server_metadata(http: httpx2.AsyncClient, issuer: str, server_url: str) -> OAuthMetadata:
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
        go_on, found = await handle_auth_metadata_response(await http.send(create_oauth_metadata_request(url)))
        if found is not None:
            if not _same_issuer(str(found.issuer), issuer):  # RFC 8414, section 3.3
                raise OAuthProblem(f"the authorization server metadata of {issuer} names issuer {found.issuer}")
            return found
        if not go_on:
            break
    raise OAuthProblem(f"no authorization server metadata found for {issuer} (RFC 8414 / OpenID discovery)")


def _resource_of(metadata: ProtectedResourceMetadata, server_url: str) -> str:
    """The resource the tokens are for (RFC 8707): the server's own, which must be its URL's
    origin and a prefix of its path (RFC 9728, section 3.3)."""
    resource = str(metadata.resource)
    ours, theirs = urlparse(server_url), urlparse(resource)
    if (ours.scheme, ours.netloc) != (theirs.scheme, theirs.netloc) or not ours.path.startswith(
        theirs.path.rstrip("/")
    ):
        raise OAuthProblem(f"{server_url} claims to be the resource {resource}: refused")
    return resource if theirs.path not in ("", "/") else server_url


class Registrations(Protocol):
    """Where dynamically registered clients are kept, by authorization server: one
    registration serves every user's flows (the registry's, shared by replicas)."""

    async def get(self, issuer: str) -> Client | None: ...

    async def put(self, issuer: str, client: Client) -> None: ...


async def discover(
    server_url: str, oauth: Mapping[str, str], redirect_uri: str, registrations: Registrations | None = None
) -> Endpoints:
    """Everything needed to send a user to authorize `server_url` and to get its tokens."""
    async with http_client() as http:
        try:
            resource_metadata = await _resource_metadata(http, server_url)
            issuer = str(resource_metadata.authorization_servers[0])
            metadata = await _server_metadata(http, issuer, server_url)
            known = None if oauth.get("clientId") or registrations is None else await registrations.get(issuer)
            client = known or await _client(http, metadata, oauth, redirect_uri)
            if known is None and not oauth.get("clientId") and registrations is not None:
                await registrations.put(issuer, client)
        except httpx2.HTTPError as exc:
            raise OAuthProblem(f"OAuth discovery for {server_url} failed: {type(exc).__name__}") from None
    if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
        raise OAuthProblem(f"the authorization server {issuer} does not support PKCE S256")
    scope = oauth.get("scope") or (" ".join(resource_metadata.scopes_supported or ()) or None)
    return Endpoints(
        issuer=str(metadata.issuer),
        authorization_endpoint=str(metadata.authorization_endpoint),
        token_endpoint=str(metadata.token_endpoint),
        resource=_resource_of(resource_metadata, server_url),
        client=client,
        scope=scope,
    )


async def _client(
    http: httpx2.AsyncClient, metadata: OAuthMetadata, oauth: Mapping[str, str], redirect_uri: str
) -> Client:
    if oauth.get("clientId"):
        secret = oauth.get("clientSecret")
        methods = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        method = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
        if not secret:
            method = "none"
        return Client(oauth["clientId"], secret, method)
    if metadata.registration_endpoint is None:
        raise OAuthProblem(
            f"the authorization server {metadata.issuer} offers no dynamic registration: "
            'configure a registered client in the server\'s "oauth" ("clientId", "clientSecret")'
        )
    wanted = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the URL
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        client_name=CLIENT_NAME,
    )
    request = create_client_registration_request(metadata, wanted, str(metadata.issuer))
    registered = await handle_registration_response(await http.send(request))
    return Client(
        registered.client_id or "",
        registered.client_secret,
        registered.token_endpoint_auth_method or ("client_secret_post" if registered.client_secret else "none"),
    )


def pkce() -> PKCEParameters:
    return PKCEParameters.generate()


def authorization_url(endpoints: Endpoints, redirect_uri: str, state: str, challenge: str) -> str:
    params = {
        "response_type": "code",
        "client_id": endpoints.client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": endpoints.resource,
    }
    if endpoints.scope:
        params["scope"] = endpoints.scope
    joiner = "&" if "?" in endpoints.authorization_endpoint else "?"
    return endpoints.authorization_endpoint + joiner + urlencode(params)


async def _token_request(endpoints: Endpoints, form: dict[str, str]) -> Tokens:
    client = endpoints.client
    headers = {"Accept": "application/json"}
    form = {**form, "resource": endpoints.resource}
    if client.auth_method == "client_secret_basic" and client.client_secret:
        pair = f"{client.client_id}:{client.client_secret}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    else:
        form["client_id"] = client.client_id
        if client.client_secret:
            form["client_secret"] = client.client_secret
    async with http_client() as http:
        try:
            response = await http.post(endpoints.token_endpoint, data=form, headers=headers)
        except httpx2.HTTPError as exc:
            raise OAuthProblem(f"the token endpoint of {endpoints.issuer} failed: {type(exc).__name__}") from None
    if response.status_code != 200:
        # The error code only: a body may echo what was sent.
        try:
            code = str(json.loads(response.content).get("error", "?"))
        except (ValueError, AttributeError):
            code = "?"
        raise OAuthProblem(f"the token endpoint of {endpoints.issuer} refused: {response.status_code} {code[:64]}")
    token = OAuthToken.model_validate_json(response.content)
    expires_at = None if token.expires_in is None else time.time() + token.expires_in
    return Tokens(token.access_token, token.refresh_token, expires_at)


async def exchange_code(endpoints: Endpoints, code: str, verifier: str, redirect_uri: str) -> Tokens:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "code_verifier": verifier}
    return await _token_request(endpoints, form)


async def refresh(endpoints: Endpoints, refresh_token: str) -> Tokens:
    tokens = await _token_request(endpoints, {"grant_type": "refresh_token", "refresh_token": refresh_token})
    # A server that does not rotate keeps the refresh token it had (RFC 6749, section 6).
    return tokens if tokens.refresh_token else Tokens(tokens.access_token, refresh_token, tokens.expires_at)


async def exchange_endpoints(server_url: str, oauth: Mapping[str, str]) -> Endpoints:
    """Where a token exchange (RFC 8693) for `server_url` goes: the configured `tokenEndpoint`,
    else its authorization server's, found by discovery; the client is the configured one."""
    client = Client(
        oauth.get("clientId", ""),
        oauth.get("clientSecret"),
        "client_secret_basic" if oauth.get("clientSecret") else "none",
    )
    endpoint = oauth.get("tokenEndpoint")
    if endpoint:
        return Endpoints(endpoint, endpoint, endpoint, server_url, client, oauth.get("scope"))
    async with http_client() as http:
        try:
            resource_metadata = await _resource_metadata(http, server_url)
            issuer = str(resource_metadata.authorization_servers[0])
            metadata = await _server_metadata(http, issuer, server_url)
        except httpx2.HTTPError as exc:
            raise OAuthProblem(f"OAuth discovery for {server_url} failed: {type(exc).__name__}") from None
    resource = _resource_of(resource_metadata, server_url)
    return Endpoints(
        str(metadata.issuer), str(metadata.authorization_endpoint), str(metadata.token_endpoint), resource, client,
        oauth.get("scope"),
    )  # fmt: skip


async def exchange_token(endpoints: Endpoints, subject_token: str, audience: str | None = None) -> Tokens:
    """The tenant's own token (a JWT of the gateway's identity provider) exchanged for one of the
    upstream's (RFC 8693): no browser, where the upstream's authorization server trusts it."""
    form = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject_token, "subject_token_type": JWT_TOKEN_TYPE}
    if audience:
        form["audience"] = audience
    if endpoints.scope:
        form["scope"] = endpoints.scope
    return await _token_request(endpoints, form)
