"""Each user's authorization of each of their own servers: begun, completed, used, refreshed.

The tokens live in the registry, encrypted with the secrets-at-rest key, as one JSON value per
user and server (with the endpoints and client they were issued through, so any replica can
refresh them); a flow in progress is a row found by a digest of its `state`, holding the PKCE
verifier (encrypted): taken once, by the callback, and only within FLOW_TTL. The gateway asks a
`StoredCredentials` for the token before each request: from memory while it is valid (no
registry read, nothing decrypted), else read, and refreshed once it expires; a rotating refresh
token is kept; a refresh refused forgets the authorization, and the user is asked again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from toolroute.mcp.config import parse_server
from toolroute.serve.store import UserStore
from toolroute.serve.upstream_oauth import protocol
from toolroute.serve.upstream_oauth.protocol import Endpoints, OAuthProblem, Tokens

log = logging.getLogger("toolroute.serve")

FLOW_TTL = 600.0  # seconds a user has from the connect page to the callback
REFRESH_SKEW = 2.0  # refresh this long before the token's expiry, not after a refused request
CONNECT_PATH = "/oauth/connect"
CALLBACK_PATH = "/oauth/callback"


def state_digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _tokens_json(tokens: Tokens, endpoints: Endpoints) -> str:
    return json.dumps(
        {
            "access_token": tokens.access_token,
            "refresh_token": tokens.refresh_token,
            "expires_at": tokens.expires_at,
            "endpoints": endpoints.to_json(),
        },
        sort_keys=True,
    )


def _parse_tokens(text: str) -> tuple[Tokens, Endpoints]:
    data = json.loads(text)
    tokens = Tokens(data["access_token"], data.get("refresh_token"), data.get("expires_at"))
    return tokens, Endpoints.from_json(data["endpoints"])


class FlowRefused(Exception):
    """A callback that completes nothing (unknown, used or expired state, wrong issuer, the
    authorization server refused the code): nothing is stored."""


@dataclass
class Authorizations:
    """Users' authorizations of their own servers, for one deployment at `base_url` (the
    origin the connect page and the callback are served at)."""

    store: UserStore
    base_url: str
    # Each user's latest verified JWT (token, expiry), for servers configured for RFC 8693
    # token exchange: in memory only, as it came with the user's own request.
    subjects: dict[str, tuple[str, float]] = field(default_factory=dict)

    def note_subject(self, user_id: str, token: str, expires_at: float | None) -> None:
        if expires_at is not None:
            self.subjects[user_id] = (token, expires_at)

    def subject_token(self, user_id: str) -> str | None:
        found = self.subjects.get(user_id)
        return found[0] if found is not None and found[1] > time.time() + REFRESH_SKEW else None

    @property
    def redirect_uri(self) -> str:
        return self.base_url.rstrip("/") + CALLBACK_PATH

    def connect_url(self, user_id: str, server_id: str) -> str:
        return self.base_url.rstrip("/") + CONNECT_PATH + "?" + urlencode({"user": user_id, "server": server_id})

    def credentials(
        self, user_id: str, server_id: str, config: Mapping[str, Any] | None = None
    ) -> StoredCredentials | ExchangedCredentials:
        """The credentials the gateway asks for the token of `user_id`'s `server_id` (as
        configured: by token exchange, or by the user's own authorization)."""
        oauth = (config or {}).get("oauth")
        if isinstance(oauth, Mapping) and str(oauth.get("tokenExchange", "")).lower() == "true":
            return ExchangedCredentials(self, user_id, server_id, str(config["url"]), oauth)  # type: ignore[index]
        return StoredCredentials(self, user_id, server_id)

    async def begin(self, user_id: str, server_id: str) -> str:
        """A new flow of `user_id` (already authenticated) for `server_id`: the authorization
        server's URL to send the user's browser to."""
        config = (await asyncio.to_thread(self.store.servers, user_id)).get(server_id)
        if config is None:
            raise FlowRefused(f"user {user_id!r} has no server {server_id!r}")
        parsed = parse_server(server_id, config)
        if parsed.oauth is None or parsed.url is None:
            raise FlowRefused(f"server {server_id!r} is not one its user authorizes with OAuth")
        endpoints = await protocol.discover(parsed.url, parsed.oauth, self.redirect_uri, _Registrations(self))
        pkce = protocol.pkce()
        state = secrets.token_urlsafe(32)
        flow = json.dumps({"endpoints": endpoints.to_json(), "verifier": pkce.code_verifier})
        older = time.time() - FLOW_TTL
        await asyncio.to_thread(self.store.add_oauth_flow, state_digest(state), user_id, server_id, flow, older)
        return protocol.authorization_url(endpoints, self.redirect_uri, state, pkce.code_challenge)

    async def complete(self, state: str, code: str, iss: str | None) -> tuple[str, str]:
        """The callback: the flow of `state` (taken, so never twice) exchanges `code` with its
        own PKCE verifier, and the tokens are stored for the flow's user and server alone."""
        taken = await asyncio.to_thread(self.store.take_oauth_flow, state_digest(state))
        if taken is None:
            raise FlowRefused("no authorization in progress has this state (unknown, used or expired)")
        user_id, server_id, text, begun = taken
        if time.time() - begun > FLOW_TTL:
            raise FlowRefused("the authorization took too long: start again")
        flow = json.loads(text)
        endpoints = Endpoints.from_json(flow["endpoints"])
        if iss is not None and iss.rstrip("/") != endpoints.issuer.rstrip("/"):  # RFC 9207
            raise FlowRefused("the authorization response names another issuer")
        try:
            tokens = await protocol.exchange_code(endpoints, code, flow["verifier"], self.redirect_uri)
        except OAuthProblem as exc:
            if "invalid_client" in str(exc):  # a registration the server forgot: made again next time
                registration = _registration_key(endpoints.issuer, self.redirect_uri)
                await asyncio.to_thread(self.store.forget_setting, registration)
            raise FlowRefused(str(exc)) from None
        grant = secrets.token_hex(16)
        await asyncio.to_thread(
            self.store.put_upstream_tokens, user_id, server_id, grant, _tokens_json(tokens, endpoints)
        )
        log.info("user %r authorized their MCP server %r", user_id, server_id)
        return user_id, server_id

    def forget(self, user_id: str, server_id: str | None = None) -> int:
        return self.store.forget_upstream_tokens(user_id, server_id)


def _registration_key(issuer: str, redirect_uri: str) -> str:
    return "oauth_client:" + hashlib.sha256(f"{issuer.rstrip('/')} {redirect_uri}".encode()).hexdigest()


class _Registrations:
    """Dynamically registered clients in the registry's settings (the secret encrypted)."""

    def __init__(self, authorizations: Authorizations) -> None:
        self.authorizations = authorizations

    async def get(self, issuer: str) -> protocol.Client | None:
        key = _registration_key(issuer, self.authorizations.redirect_uri)
        text = await asyncio.to_thread(self.authorizations.store.secret_setting, key)
        return None if text is None else protocol.Client(**json.loads(text))

    async def put(self, issuer: str, client: protocol.Client) -> None:
        key = _registration_key(issuer, self.authorizations.redirect_uri)
        text = json.dumps(dataclasses.asdict(client))
        await asyncio.to_thread(self.authorizations.store.put_secret_setting, key, text)


class StoredCredentials:
    """One user's token for one server, as the gateway asks for it (mcp/credentials.py)."""

    def __init__(self, authorizations: Authorizations, user_id: str, server_id: str) -> None:
        self.authorizations = authorizations
        self.user_id = user_id
        self.server_id = server_id
        self._tokens: Tokens | None = None
        self._endpoints: Endpoints | None = None
        self._grant: str | None = None
        self._read: str | None = None  # the row's text as read: a renewal replaces only that
        self._lock: asyncio.Lock | None = None

    @property
    def store(self) -> UserStore:
        return self.authorizations.store

    def authorization_url(self) -> str:
        return self.authorizations.connect_url(self.user_id, self.server_id)

    async def token(self) -> str | None:
        tokens = self._tokens
        if tokens is not None and not tokens.expired(REFRESH_SKEW):
            return tokens.access_token  # the common case: no lock, no registry read
        async with self._locked():
            tokens = self._tokens
            if tokens is None or tokens.expired(REFRESH_SKEW):
                tokens = await self._load()
                if tokens is not None and tokens.expired(REFRESH_SKEW):
                    tokens = await self._refresh()
            return None if tokens is None else tokens.access_token

    async def rejected(self, token: str) -> str | None:
        async with self._locked():
            tokens = await self._load()
            if tokens is not None and tokens.access_token != token and not tokens.expired(REFRESH_SKEW):
                return tokens.access_token  # refreshed elsewhere meanwhile
            if tokens is None:
                return None
            fresh = await self._refresh()
            return None if fresh is None else fresh.access_token

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _load(self) -> Tokens | None:
        row = await asyncio.to_thread(self.store.upstream_tokens, self.user_id, self.server_id)
        if row is None:
            self._tokens = self._endpoints = self._grant = self._read = None
            return None
        self._grant, self._read = row
        self._tokens, self._endpoints = _parse_tokens(row[1])
        return self._tokens

    async def _refresh(self) -> Tokens | None:
        """Refresh the loaded tokens (under the lock); None when the user must authorize again."""
        tokens, endpoints, grant, read = self._tokens, self._endpoints, self._grant, self._read
        assert endpoints is not None and grant is not None and read is not None
        if tokens is None or tokens.refresh_token is None:
            await self._give_up(grant, "no refresh token")
            return None
        try:
            fresh = await protocol.refresh(endpoints, tokens.refresh_token)
        except OAuthProblem as exc:
            # Another replica may have rotated the refresh token first: its result stands.
            again = await self._load()
            if again is not None and self._read != read and not again.expired(REFRESH_SKEW):
                return again
            await self._give_up(grant, str(exc))
            return None
        text = _tokens_json(fresh, endpoints)
        renewed = await asyncio.to_thread(
            self.store.renew_upstream_tokens, self.user_id, self.server_id, grant, read, text
        )
        if not renewed:  # another replica renewed, or the user authorized anew: theirs stands
            return await self._load()
        self._tokens, self._read = fresh, text
        return fresh

    async def _give_up(self, grant: str, why: str) -> None:
        log.info("user %r: the authorization of MCP server %r ended (%s)", self.user_id, self.server_id, why)
        await asyncio.to_thread(self.store.forget_upstream_tokens, self.user_id, self.server_id, grant)
        self._tokens = self._endpoints = self._grant = self._read = None

    def __repr__(self) -> str:  # never the token
        return f"StoredCredentials({self.user_id!r}, {self.server_id!r})"


class ExchangedCredentials:
    """A token of the upstream's got by exchanging the tenant's own JWT (RFC 8693), kept in
    memory until it expires: no browser step. Without a JWT of the user's (an API-key user, or
    one whose token expired) the user is sent to the connect page, as for any OAuth server."""

    def __init__(
        self, authorizations: Authorizations, user_id: str, server_id: str, url: str, oauth: Mapping[str, Any]
    ) -> None:
        self.authorizations = authorizations
        self.user_id = user_id
        self.server_id = server_id
        self.url = url
        self.oauth = {str(k): str(v) for k, v in oauth.items()}
        self._tokens: Tokens | None = None
        self._subject: str | None = None  # the JWT `_tokens` was exchanged for
        self._endpoints: Endpoints | None = None
        self._lock: asyncio.Lock | None = None

    def authorization_url(self) -> str:
        return self.authorizations.connect_url(self.user_id, self.server_id)

    async def token(self) -> str | None:
        subject = self.authorizations.subject_token(self.user_id)
        tokens = self._tokens
        if tokens is not None and subject == self._subject and not tokens.expired(REFRESH_SKEW):
            return tokens.access_token
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await self._exchange(subject)

    async def rejected(self, token: str) -> str | None:
        if self._tokens is not None and self._tokens.access_token == token:
            self._tokens = None
        return await self.token()

    async def _exchange(self, subject: str | None) -> str | None:
        if subject is None:
            self._tokens = None
            return None
        if self._tokens is not None and subject == self._subject and not self._tokens.expired(REFRESH_SKEW):
            return self._tokens.access_token  # another call exchanged it meanwhile
        try:
            if self._endpoints is None:
                self._endpoints = await protocol.exchange_endpoints(self.url, self.oauth)
            tokens = await protocol.exchange_token(self._endpoints, subject, self.oauth.get("audience"))
        except OAuthProblem as exc:
            log.info("user %r: token exchange for MCP server %r refused (%s)", self.user_id, self.server_id, exc)
            self._tokens = None
            return None
        self._tokens, self._subject = tokens, subject
        return tokens.access_token

    def __repr__(self) -> str:  # never the token
        return f"ExchangedCredentials({self.user_id!r}, {self.server_id!r})"
