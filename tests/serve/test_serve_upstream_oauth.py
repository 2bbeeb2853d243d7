"""Users authorize their own OAuth-protected upstream servers (issue 58): `toolroute serve` as the
OAuth client of a real protected MCP server and authorization server (the `mcp` SDK's server auth
pieces, tests/mcp_servers/protected_server.py) on 127.0.0.1, driven the way a user's client and
browser would: the first call answers -32042 with a link and nothing reaches the upstream; the
browser (this test, following the redirects and logging in) authorizes; the retried call reaches
the upstream as that user. Each tenant is asked separately; forged callbacks store nothing; tokens
expire (5 s) and are refreshed silently; a revoked authorization asks again; no token appears in
the registry file, the logs or the audit log."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS
from _postgres import postgres_server
from _serve_helpers import TOOLS_MODULE, ServedProcess, outside_tmp, served_http, stop_process, tool_env
from cryptography.fernet import Fernet
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from toolroute.serve.secrets import KEY_ENV
from toolroute.serve.store import UserStore

PROTECTED = str(SERVERS / "protected_server.py")
LIFETIME = 5  # seconds an access token lives
WAIT = 60.0  # generous bound for a server to start on a shared machine


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Upstream:
    base: str

    def seen(self) -> list[dict[str, Any]]:
        return list(httpx2.get(f"{self.base}/admin/seen", timeout=10).json())

    def issued(self) -> dict[str, int]:
        return dict(httpx2.get(f"{self.base}/admin/issued", timeout=10).json())

    def revoke(self, user: str) -> int:
        return int(httpx2.post(f"{self.base}/admin/revoke", params={"user": user}, timeout=10).json()["revoked"])


@dataclass
class Deployment:
    upstream: Upstream
    served: ServedProcess
    store_url: str
    registry: Path
    audit: Path
    keys: dict[str, str]

    @property
    def url(self) -> str:
        return self.served.url


@contextlib.contextmanager
def registry_key() -> Iterator[str]:
    """A fresh registry key, in this process's environment too (the test's own UserStore)."""
    key = Fernet.generate_key().decode()
    previous = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = key
    try:
        yield key
    finally:
        if previous is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = previous


@contextlib.contextmanager
def protected_upstream(*extra: str) -> Iterator[Upstream]:
    port = _free_port()
    upstream = subprocess.Popen(
        [sys.executable, PROTECTED, "--port", str(port), "--lifetime", str(LIFETIME), *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(f"{base}/.well-known/oauth-authorization-server", upstream)
        yield Upstream(base)
    finally:
        stop_process(upstream)


def registered(store_url: str, upstream: Upstream) -> dict[str, str]:
    """alice and bob, each with an API key and the protected server as their own `gh`."""
    with UserStore(store_url) as store:
        keys = {}
        for user in ("alice", "bob"):
            store.add_user(user)
            keys[user] = store.add_key(user)
            store.add_server(user, "gh", {"url": f"{upstream.base}/mcp", "oauth": {}})
    return keys


def serve_args(tmp: Path, store_url: str, audit: str = "audit.jsonl") -> list[str]:
    return [
        *("--modules", TOOLS_MODULE, "--functions", "echo"),
        *("--api-keys", "--store", store_url, "--workspace-template", str(tmp / "ws" / "{user}")),
        *("--audit-log", str(tmp / audit)),
    ]


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    tmp = outside_tmp()
    try:
        with registry_key() as key, protected_upstream() as upstream:
            registry = tmp / "users.db"
            store_url = f"sqlite:///{registry}"
            keys = registered(store_url, upstream)
            with served_http(serve_args(tmp, store_url), tool_env(**{KEY_ENV: key})) as served:
                yield Deployment(upstream, served, store_url, registry, tmp / "audit.jsonl", keys)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_until_up(url: str, proc: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the protected server exited"
        try:
            if httpx2.get(url, timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{url} did not come up")


# ---- the tenant's MCP client ------------------------------------------------------------------

Outcome = tuple[Any, ...]


async def _call(url: str, key: str, tool_suffix: str) -> Outcome:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        names = [t.name for t in (await client.list_tools()).tools if t.name.endswith(tool_suffix)]
        if not names:
            return ("absent",)
        try:
            result = await client.call_tool(names[0], {})
        except MCPError as exc:
            return ("error", exc.error.code, exc.error.data)
        return ("ok", result.is_error, [getattr(c, "text", None) for c in result.content])


def call(deployment: Deployment, user: str, tool_suffix: str = "whoami") -> Outcome:
    return anyio.run(_call, deployment.url, deployment.keys[user], tool_suffix)


def link_of(outcome: Outcome) -> str:
    assert outcome[0] == "error" and outcome[1] == types.URL_ELICITATION_REQUIRED, outcome
    (elicitation,) = outcome[2]["elicitations"]
    assert elicitation["mode"] == "url"
    return str(elicitation["url"])


def first_call(deployment: Deployment, user: str) -> str:
    """The user's first call: only `authorize` is listed, and it answers with the link."""
    assert call(deployment, user, "whoami") == ("absent",)
    return link_of(call(deployment, user, "authorize"))


# ---- the user's browser -----------------------------------------------------------------------


def basic(user: str, key: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()}


def to_callback(link: str, headers: dict[str, str], login_as: str) -> str:
    """Open the link with `headers`, log in at the authorization server as `login_as`: the
    callback URL the authorization server redirects to (not opened yet)."""
    with httpx2.Client(timeout=30, follow_redirects=False) as browser:
        page = browser.get(link, headers=headers)
        assert page.status_code == 302, (page.status_code, page.text)
        authorize = page.headers["location"]
        query = parse_qs(urlparse(authorize).query)
        assert query["code_challenge_method"] == ["S256"] and query["resource"][0].endswith("/mcp")
        login = browser.get(authorize)
        assert login.status_code == 302, login.text
        pending = parse_qs(urlparse(login.headers["location"]).query)["pending"][0]
        origin = f"{urlparse(authorize).scheme}://{urlparse(authorize).netloc}"
        logged_in = browser.post(
            f"{origin}/login", data={"pending": pending, "username": login_as, "password": f"{login_as}-pw"}
        )
        assert logged_in.status_code == 302, logged_in.text
        return str(logged_in.headers["location"])


def authorize(deployment: Deployment, user: str, link: str) -> None:
    callback = to_callback(link, basic(user, deployment.keys[user]), user)
    done = httpx2.get(callback, timeout=30)
    assert done.status_code == 200, done.text


def stored_grant(deployment: Deployment, user: str) -> str | None:
    with UserStore(deployment.store_url) as store:
        row = store.upstream_tokens(user, "gh")
    return None if row is None else row[0]


# ---- the tests (in order: each builds on the state the one before left) ---------------------------


def test_first_call_elicits_and_nothing_reaches_the_upstream(deployment: Deployment) -> None:
    link = first_call(deployment, "alice")
    assert link.startswith(deployment.url.rsplit("/mcp", 1)[0] + "/oauth/connect?")
    assert "user=alice" in link and "server=gh" in link
    assert deployment.upstream.seen() == []  # no MCP request reached the resource
    assert stored_grant(deployment, "alice") is None


def test_alices_link_opened_without_or_with_bobs_credentials_stores_nothing(deployment: Deployment) -> None:
    link = first_call(deployment, "alice")
    unsigned = httpx2.get(link, timeout=30)
    assert unsigned.status_code == 401 and "Basic" in unsigned.headers["www-authenticate"]
    as_bob = httpx2.get(link, headers=basic("bob", deployment.keys["bob"]), timeout=30)
    assert as_bob.status_code == 403
    bob_claims_alice = httpx2.get(link, headers=basic("alice", deployment.keys["bob"]), timeout=30)
    assert bob_claims_alice.status_code == 401
    bearer_bob = httpx2.get(link, headers={"Authorization": f"Bearer {deployment.keys['bob']}"}, timeout=30)
    assert bearer_bob.status_code == 403
    assert stored_grant(deployment, "alice") is None


def test_hostile_connect_links_and_refusals_begin_nothing(deployment: Deployment) -> None:
    link = first_call(deployment, "alice")
    alice = basic("alice", deployment.keys["alice"])
    base = link.split("?", 1)[0]
    for params in ({"user": "alice", "server": "nope"}, {"user": "alice"}, {"server": "gh"}, {}):
        assert httpx2.get(base, params=params, headers=alice, timeout=30).status_code == 400, params
    garbled = {"Authorization": "Basic %%%not-base64"}
    assert httpx2.get(link, headers=garbled, timeout=30).status_code == 401
    # The user refuses at the authorization server: the flow ends, its state spent.
    callback = to_callback(link, alice, "alice")
    state = parse_qs(urlparse(callback).query)["state"][0]
    refused = httpx2.get(callback.split("?", 1)[0], params={"error": "access_denied", "state": state}, timeout=30)
    assert refused.status_code == 400
    assert httpx2.get(callback, timeout=30).status_code == 400
    assert stored_grant(deployment, "alice") is None


def test_forged_callbacks_store_nothing(deployment: Deployment) -> None:
    alice_link, bob_link = first_call(deployment, "alice"), first_call(deployment, "bob")
    alice_callback = to_callback(alice_link, basic("alice", deployment.keys["alice"]), "alice")
    bob_callback = to_callback(bob_link, basic("bob", deployment.keys["bob"]), "bob")
    alice_state = parse_qs(urlparse(alice_callback).query)["state"][0]
    bob_code = parse_qs(urlparse(bob_callback).query)["code"][0]
    base = alice_callback.split("?", 1)[0]
    wrong_state = httpx2.get(base, params={"code": bob_code, "state": "forged-" + alice_state[:20]}, timeout=30)
    assert wrong_state.status_code == 400
    # Bob's code replayed into alice's flow: the authorization server refuses it (PKCE), and
    # alice's flow is spent.
    replayed = httpx2.get(base, params={"code": bob_code, "state": alice_state}, timeout=30)
    assert replayed.status_code == 400
    assert httpx2.get(alice_callback, timeout=30).status_code == 400  # a state is used once
    assert stored_grant(deployment, "alice") is None and stored_grant(deployment, "bob") is None
    assert deployment.upstream.issued()["authorization_code"] == 0


def test_alice_authorizes_and_her_retried_call_reaches_the_upstream_as_her(deployment: Deployment) -> None:
    authorize(deployment, "alice", first_call(deployment, "alice"))
    assert stored_grant(deployment, "alice") is not None
    assert call(deployment, "alice") == ("ok", False, ["you are alice"])
    assert deployment.upstream.seen() == [{"tool": "whoami", "user": "alice"}]
    # Bob is still asked, separately, and never gets alice's token.
    link_of(call(deployment, "bob", "authorize"))
    assert call(deployment, "bob", "whoami") == ("absent",)
    assert deployment.upstream.seen() == [{"tool": "whoami", "user": "alice"}]


def test_bob_authorizes_as_himself(deployment: Deployment) -> None:
    authorize(deployment, "bob", link_of(call(deployment, "bob", "authorize")))
    assert call(deployment, "bob") == ("ok", False, ["you are bob"])
    assert call(deployment, "alice") == ("ok", False, ["you are alice"])


def test_an_expired_access_token_is_refreshed_silently(deployment: Deployment) -> None:
    grant = stored_grant(deployment, "alice")
    refreshed = deployment.upstream.issued()["refresh_token"]
    time.sleep(LIFETIME + 1)  # the access token expires (not a timed assertion: a wait for expiry)
    assert call(deployment, "alice") == ("ok", False, ["you are alice"])
    assert deployment.upstream.issued()["refresh_token"] > refreshed
    assert stored_grant(deployment, "alice") == grant  # the same authorization, rotated tokens
    assert call(deployment, "alice") == ("ok", False, ["you are alice"])


def test_a_revoked_authorization_asks_again(deployment: Deployment) -> None:
    assert deployment.upstream.revoke("alice") > 0
    link = link_of(call(deployment, "alice", "whoami"))
    assert "user=alice" in link
    assert stored_grant(deployment, "alice") is None
    authorize(deployment, "alice", link)
    assert call(deployment, "alice") == ("ok", False, ["you are alice"])
    assert call(deployment, "bob") == ("ok", False, ["you are bob"])  # bob's untouched
    # One dynamic registration served every flow of every user (kept in the registry).
    assert deployment.upstream.issued()["registrations"] == 1


def test_forget_auth_from_the_command_line(deployment: Deployment) -> None:
    from _serve_helpers import run_cli

    done = run_cli(
        "users", "--store", deployment.store_url, "servers", "forget-auth", "bob", "gh",
        env=tool_env(**{KEY_ENV: os.environ[KEY_ENV]}),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stored_grant(deployment, "bob") is None
    link_of(call(deployment, "bob", "authorize"))


def test_no_token_appears_in_the_registry_logs_or_audit(deployment: Deployment) -> None:
    with UserStore(deployment.store_url) as store:
        row = store.upstream_tokens("alice", "gh")
    assert row is not None
    tokens = json.loads(row[1])
    secrets = [tokens["access_token"], tokens["refresh_token"]]
    found = re.findall(r"(?:at|rt)-[A-Za-z0-9_-]{20,}", deployment.served.drain())
    assert found == []
    blobs = b"".join(p.read_bytes() for p in deployment.registry.parent.glob("users.db*"))
    blobs += deployment.audit.read_bytes() if deployment.audit.exists() else b""
    for secret in secrets:
        assert secret.encode() not in blobs
    assert b"at-" not in deployment.audit.read_bytes() if deployment.audit.exists() else True


def test_replicas_sharing_a_postgresql_registry_share_authorizations() -> None:
    """Authorized through one replica, called through another; refreshed through the second,
    still served by the first; forgotten, asked again by both."""
    tmp = outside_tmp()
    try:
        with registry_key() as key, protected_upstream() as upstream, postgres_server() as dsn:
            keys = registered(dsn, upstream)
            env = tool_env(**{KEY_ENV: key})
            with (
                served_http(serve_args(tmp, dsn, "a.jsonl"), env) as one,
                served_http(serve_args(tmp, dsn, "b.jsonl"), env) as two,
            ):
                a = Deployment(upstream, one, dsn, tmp, tmp / "a.jsonl", keys)
                b = Deployment(upstream, two, dsn, tmp, tmp / "b.jsonl", keys)
                link = link_of(call(a, "alice", "authorize"))
                link_of(call(b, "alice", "authorize"))
                authorize(a, "alice", link)
                assert call(b, "alice") == ("ok", False, ["you are alice"])
                assert call(a, "alice") == ("ok", False, ["you are alice"])
                time.sleep(LIFETIME + 1)  # the access token expires
                assert call(b, "alice") == ("ok", False, ["you are alice"])
                assert call(a, "alice") == ("ok", False, ["you are alice"])
                assert upstream.issued()["refresh_token"] >= 1
                assert stored_grant(a, "alice") is not None  # no replica lost the rotation
                link_of(call(b, "bob", "authorize"))  # bob is asked on either
                with UserStore(dsn) as store:
                    assert store.forget_auth("alice") == 1
                link_of(call(a, "alice", "authorize"))
                link_of(call(b, "alice", "authorize"))
                assert upstream.seen() == [{"tool": "whoami", "user": "alice"}] * 4
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_token_exchange_reaches_the_upstream_as_the_tenant_with_no_browser() -> None:
    """RFC 8693: the upstream's authorization server trusts the gateway's identity provider, so
    each tenant's own JWT is exchanged for an upstream token of theirs; nothing is stored."""
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    idp = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tmp = outside_tmp()
    try:
        pem = tmp / "idp.pem"
        pem.write_bytes(
            idp.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

        def jwt_of(sub: str) -> str:
            claims = {"sub": sub, "iss": "https://idp.test", "aud": "toolroute-test", "exp": int(time.time()) + 300}
            return jwt.encode(claims, idp, algorithm="RS256")

        with registry_key() as key, protected_upstream("--trust-idp", str(pem)) as upstream:
            store_url = f"sqlite:///{tmp / 'users.db'}"
            exchange = {
                "tokenExchange": True,
                "tokenEndpoint": f"{upstream.base}/exchange",
                "clientId": "gateway",
                "clientSecret": "gw-secret",
            }
            with UserStore(store_url) as store:
                for user in ("carol", "dave"):
                    store.add_user(user)
                    store.add_server(user, "gh", {"url": f"{upstream.base}/mcp", "oauth": exchange})
                store.add_user("erin")  # the wrong client secret: refused, and erin is asked instead
                wrong = {**exchange, "clientSecret": "not-it"}
                store.add_server("erin", "gh", {"url": f"{upstream.base}/mcp", "oauth": wrong})
            args = [
                *("--modules", TOOLS_MODULE, "--functions", "echo", "--store", store_url),
                *("--auth-public-key", str(pem), "--auth-issuer", "https://idp.test"),
                *("--auth-audience", "toolroute-test", "--workspace-template", str(tmp / "ws" / "{user}")),
            ]
            with served_http(args, tool_env(**{KEY_ENV: key})) as served:
                tokens = {user: jwt_of(user) for user in ("carol", "dave", "erin")}
                d = Deployment(upstream, served, store_url, tmp, tmp / "none.jsonl", tokens)
                assert call(d, "carol") == ("ok", False, ["you are carol"])
                assert call(d, "dave") == ("ok", False, ["you are dave"])
                assert call(d, "carol") == ("ok", False, ["you are carol"])
                assert "user=erin" in link_of(call(d, "erin", "authorize"))
                assert upstream.issued().get("token_exchange") == 2  # one each, then kept in memory
                assert upstream.issued()["authorization_code"] == 0
                with UserStore(store_url) as store:
                    assert store.upstream_tokens("carol", "gh") is None  # exchanged tokens are not stored
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
