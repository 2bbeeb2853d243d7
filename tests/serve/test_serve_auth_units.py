"""The bearer verifiers in process: what the JWT cache may and may not remember, limits' counters."""

from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from toolroute.errors import ToolArgumentError
from toolroute.serve.auth import AuthConfigError, JwtVerifier
from toolroute.serve.limits import LimitBook, LimitExceeded, UserLimits

KEY = ec.generate_private_key(ec.SECP256R1())
PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def verifier(**options: object) -> JwtVerifier:
    return JwtVerifier(issuer="https://i", audience="a", public_key=PEM.decode(), leeway=0, **options)  # type: ignore[arg-type]


def token(**changes: object) -> str:
    claims = {"sub": "alice", "iss": "https://i", "aud": "a", "exp": int(time.time()) + 300, **changes}
    return jwt.encode(claims, KEY, algorithm="ES256")


def test_a_cached_token_is_not_used_past_its_own_expiry() -> None:
    v = verifier()
    expires = int(time.time()) + 2  # a whole second at least, to be verified (and cached) first
    short = token(exp=expires)
    assert v.access_token(short) is not None
    while time.time() <= expires + 0.01:  # the clock, not a guess: until the token has expired
        time.sleep(0.05)
    assert v.access_token(short) is None  # expired: the cache does not extend a token's life


def test_the_cache_is_bounded() -> None:
    v = verifier(cache_size=3)
    tokens = [token(jti=str(i)) for i in range(10)]
    for t in tokens:
        assert v.access_token(t) is not None
    assert len(v._verified) == 3


def test_a_refused_token_is_never_cached() -> None:
    v = verifier()
    bad = token(aud="elsewhere")
    assert v.access_token(bad) is None
    assert bad not in v._verified


def test_configuration_errors_are_clear() -> None:
    with pytest.raises(AuthConfigError, match="exactly one"):
        JwtVerifier(issuer="https://i", audience="a")
    with pytest.raises(AuthConfigError, match="issuer and an audience"):
        JwtVerifier(issuer="", audience="a", public_key=PEM.decode())
    with pytest.raises(AuthConfigError, match="cannot read the JWKS"):
        JwtVerifier(issuer="https://i", audience="a", jwks="/nonexistent/jwks.json")
    with pytest.raises(AuthConfigError, match="not a PEM public key"):  # at configuration, not per call
        JwtVerifier(issuer="https://i", audience="a", public_key="-----BEGIN PUBLIC KEY-----\nnope\n")


def test_quiet_users_counters_are_forgotten_and_busy_ones_kept() -> None:
    """A server meets every user once; it keeps counters only for users with a call running or
    one started within the minute, and forgetting the others never lifts a limit."""
    now = [0.0]
    book = LimitBook(UserLimits(max_concurrent_calls=1, calls_per_minute=2), clock=lambda: now[0])
    for n in range(100):
        with book.call(f"u{n}"):
            pass
    now[0] = 30.0
    with book.call("late"):
        pass
    with book.call("late"):  # late's second call in its minute
        assert book.prune() == 0 and book.tracked() == 101  # every start is within the minute
    now[0] = 70.0
    with book.call("busy"):  # running while the prune runs
        assert book.prune() == 100  # u0..u99 started 70 s ago; late's last start was 40 s ago
        assert book.tracked() == 2
        with pytest.raises(LimitExceeded, match="already has 1 calls running"), book.call("busy"):
            pass
    with pytest.raises(LimitExceeded, match="2 calls in the last minute"), book.call("late"):
        pass  # still limited: its counter was kept
    now[0] = 200.0
    assert book.prune() == 2 and book.tracked() == 0


def test_limits_count_per_user_and_release_slots() -> None:
    now = [0.0]
    book = LimitBook(UserLimits(max_concurrent_calls=1, calls_per_minute=3), clock=lambda: now[0])
    with book.call("alice"):
        with pytest.raises(LimitExceeded, match="already has 1 calls running"), book.call("alice"):
            pass
        with book.call("bob"):  # another user's allowance is untouched
            pass
    with book.call("alice"):  # the slot was released: alice's 2nd and 3rd calls of this minute
        pass
    with book.call("alice"):
        pass
    with pytest.raises(LimitExceeded, match="3 calls in the last minute"), book.call("alice"):
        pass
    now[0] = 61.0  # a minute later the window has moved on
    with book.call("alice"):
        pass
    with pytest.raises(ToolArgumentError, match="over this server's limit"):
        LimitBook(UserLimits(max_argument_bytes=10)).check_arguments({"text": "x" * 20})
