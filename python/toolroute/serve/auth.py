"""Who is calling: bearer tokens checked as an MCP resource server, through the `mcp` SDK's hooks.

Two kinds of bearer are accepted, each by a `TokenVerifier` (the SDK's protocol):
- JWTs, validated with pyjwt: signature from a JWKS file or URL or a static public key, then
  `iss`, `aud` and `exp` (always required), and the scopes from `scope` or `scp`;
- API keys from the user registry (`trk_…`, stored hashed).

The verified `AccessToken` carries the user id in `subject` (taken from a configurable claim, or
the key's owner); served mode reads it per request. A user id outside the allowed alphabet is
refused here, so the request is answered 401 like any other bad token.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from mcp.server.auth.provider import AccessToken

from toolroute._workers import LOOKUPS, run_off_loop
from toolroute.errors import ToolArgumentError
from toolroute.naming import UserId, validate_user_id
from toolroute.serve.store import UserStore

log = logging.getLogger("toolroute.serve")

# Asymmetric algorithms only: a shared HMAC secret would let every holder mint tokens, and
# `none` is never acceptable.
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
USER_CLAIM = "sub"


class AuthConfigError(ToolArgumentError):
    """The authentication options do not make a working configuration."""


def _valid_user(user_id: object) -> str | None:
    if not isinstance(user_id, str):
        return None
    try:
        validate_user_id(user_id)
    except ToolArgumentError:
        return None
    return user_id


def _scopes(claims: dict[str, Any]) -> list[str]:
    raw = claims.get("scope", claims.get("scp", []))
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list):
        return [s for s in raw if isinstance(s, str)]
    return []


@dataclass
class JwtVerifier:
    """Validates bearer JWTs; the user is the value of `user_claim` (default `sub`)."""

    issuer: str
    audience: str
    jwks: str | None = None  # a JWKS file path or an https:// / http:// URL
    public_key: str | None = None  # PEM text of one public key
    user_claim: str = USER_CLAIM
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS
    leeway: float = 30.0
    cache_size: int = 4096  # verified tokens remembered until they expire (0: verify every call)
    _jwk_client: jwt.PyJWKClient | None = field(default=None, init=False, repr=False)
    _jwk_set: jwt.PyJWKSet | None = field(default=None, init=False, repr=False)
    _public_key: Any = field(default=None, init=False, repr=False)  # parsed once: PyJWT re-parses PEM text per call
    _verified: OrderedDict[str, AccessToken] = field(default_factory=OrderedDict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.jwks is None) == (self.public_key is None):
            raise AuthConfigError("JWT authentication needs exactly one of a JWKS (file or URL) and a public key")
        if not self.issuer or not self.audience:
            raise AuthConfigError("JWT authentication needs both an issuer and an audience")
        if self.public_key is not None:
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            try:
                self._public_key = load_pem_public_key(self.public_key.encode())
            except (ValueError, TypeError) as exc:
                raise AuthConfigError(f"the public key is not a PEM public key: {exc}") from None
        if self.jwks is not None:
            if self.jwks.startswith(("https://", "http://")):
                self._jwk_client = jwt.PyJWKClient(self.jwks, cache_keys=True, lifespan=300, timeout=10)
            else:
                try:
                    self._jwk_set = jwt.PyJWKSet.from_dict(json.loads(Path(self.jwks).read_text()))
                except (OSError, ValueError, jwt.PyJWKSetError) as exc:
                    raise AuthConfigError(f"cannot read the JWKS file {self.jwks}: {exc}") from None

    def _key(self, token: str) -> Any:
        if self._public_key is not None:
            return self._public_key
        if self._jwk_client is not None:
            return self._jwk_client.get_signing_key_from_jwt(token).key
        assert self._jwk_set is not None
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in self._jwk_set.keys if kid is None or k.key_id == kid]
        if not keys:
            raise jwt.InvalidKeyError(f"no key {kid!r} in the JWKS")
        return keys[0].key

    def decode(self, token: str) -> dict[str, Any]:
        """The token's claims, or `jwt.InvalidTokenError` (bad signature, issuer, audience, expiry)."""
        return jwt.decode(
            token,
            self._key(token),
            algorithms=list(self.algorithms),
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway,
            options={"require": ["exp", "iss", "aud"]},
        )

    def access_token(self, token: str) -> AccessToken | None:
        """The verified token, from the cache when this exact token was verified before.

        A signature check costs 0.3 ms; an agent sends the same token on every call. A cached
        entry is used only until the token's own `exp`, so caching never extends a token's life.
        """
        with self._lock:
            cached = self._verified.get(token)
            if cached is not None:
                if cached.expires_at is not None and cached.expires_at > time.time():
                    self._verified.move_to_end(token)
                    return cached
                del self._verified[token]
        verified = self._verify(token)
        if verified is not None and self.cache_size > 0:
            with self._lock:
                self._verified[token] = verified
                while len(self._verified) > self.cache_size:
                    self._verified.popitem(last=False)
        return verified

    def _verify(self, token: str) -> AccessToken | None:
        try:
            claims = self.decode(token)
        except (jwt.PyJWTError, ValueError) as exc:
            log.info("bearer JWT refused: %s", type(exc).__name__)
            return None
        user = _valid_user(claims.get(self.user_claim))
        if user is None:
            log.info("bearer JWT refused: claim %r is not a valid user id", self.user_claim)
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("azp") or claims.get("client_id") or user),
            scopes=_scopes(claims),
            expires_at=int(claims["exp"]),
            subject=user,
            # All of them: an operator's policy reads them as `user.claims` (docs/usage.md, "Policy").
            claims=claims,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        if self._jwk_client is not None:  # may fetch the key set over the network
            return await run_off_loop(functools.partial(self.access_token, token), LOOKUPS)
        return self.access_token(token)


@dataclass
class ApiKeyVerifier:
    """API keys from the user registry; a key grants `scopes` (what JWT users get from claims)."""

    store: UserStore
    scopes: Sequence[str] = ()
    attributes: bool = False  # read the user's registry attributes (a policy's `user.claims`)

    def access_token(self, token: str) -> AccessToken | None:
        user = self.store.user_for_key(token)
        if user is None:
            return None
        claims = self.store.attributes(user) if self.attributes else None
        return AccessToken(token=token, client_id=user, scopes=list(self.scopes), subject=user, claims=claims)

    async def verify_token(self, token: str) -> AccessToken | None:
        return await run_off_loop(functools.partial(self.access_token, token), LOOKUPS)


@dataclass
class Verifiers:
    """The first verifier that accepts the token wins; API keys are recognised by their prefix."""

    jwt: JwtVerifier | None = None
    api_keys: ApiKeyVerifier | None = None

    async def verify_token(self, token: str) -> AccessToken | None:
        if token.startswith("trk_"):
            return None if self.api_keys is None else await self.api_keys.verify_token(token)
        return None if self.jwt is None else await self.jwt.verify_token(token)

    @property
    def configured(self) -> bool:
        return self.jwt is not None or self.api_keys is not None


def request_token(ctx: Any) -> AccessToken | None:
    """The verified bearer token of this HTTP request (None without auth)."""
    request = getattr(ctx, "request", None)
    user = None if request is None else request.scope.get("user")
    token = getattr(user, "access_token", None)
    return token if isinstance(token, AccessToken) else None


def request_user(ctx: Any) -> UserId | None:
    """The user id the bearer token of this HTTP request was verified for (None without auth):
    where a served request's user id enters, so where it becomes a `UserId`."""
    request = getattr(ctx, "request", None)
    user = None if request is None else request.scope.get("user")
    token = getattr(user, "access_token", None)
    return None if token is None else UserId.of(token.subject)
