"""Served mode over HTTP as a real process: bearer JWTs and API keys, identity per request,
per-user tools, workspaces and limits, the audit log, and refusals for every kind of bad input.

The server is `toolroute serve` itself; clients are the `mcp` SDK's own, on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from _mcp_helpers import tenant_stdio
from _serve_helpers import TOOLS_MODULE, http_server, http_server_process, outside_tmp, processes_with, run_cli
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.server import bind_socket
from toolroute.serve.store import UserStore

ISSUER = "https://issuer.test"
AUDIENCE = "toolroute-test"
SCOPE = "tools"
SERVED = "read_file,write_file,echo,nap"


def _private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY = _private_key()
OTHER_KEY = _private_key()


def token(sub: Any = "alice", *, key: rsa.RSAPrivateKey = KEY, **changes: Any) -> str:
    claims = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300, "scope": SCOPE}
    claims.update(changes)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


@dataclass
class Served:
    url: str
    store_url: str
    workspaces: Path
    audit: Path
    bob_key: str
    revoked_key: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    # Outside /tmp, as deployed: the tenants' own servers run as their uids in their workspaces,
    # which a 0700 pytest temp folder would keep them out of (served mode refuses that setup).
    tmp = outside_tmp()
    try:
        yield from _served(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _served(tmp: Path) -> Iterator[Served]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    (tmp / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    store_url = f"sqlite:///{tmp / 'users.db'}"
    with UserStore(store_url) as store:
        for user in ("alice", "bob", "carol"):
            store.add_user(user)
        store.add_server("alice", "notes", tenant_stdio("alice-notes"))
        store.add_server("bob", "notes", tenant_stdio("bob-notes"))
        bob_key = store.add_key("bob")
        revoked = store.add_key("carol")
        store.revoke_key(store.keys("carol")[0].key_id)
    args = [
        *("--modules", TOOLS_MODULE, "--functions", SERVED),
        *("--auth-jwks", str(tmp / "jwks.json"), "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE),
        *("--auth-scopes", SCOPE, "--api-keys", "--store", store_url),
        *("--workspace-template", str(tmp / "ws" / "{user}"), "--audit-log", str(tmp / "audit.jsonl")),
        *("--max-concurrent-calls", "2", "--max-argument-bytes", "4096"),
    ]
    with http_server(args) as url:
        yield Served(url, store_url, tmp / "ws", tmp / "audit.jsonl", bob_key, revoked)


def _post(url: str, bearer: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return httpx2.post(url, json=body, headers=headers, timeout=30)


BAD_BEARERS = {
    "missing": None,
    "garbage": "not-a-token",
    "expired": token(exp=int(time.time()) - 3600),
    "wrongly signed": token(key=OTHER_KEY),
    "wrong audience": token(aud="someone-else"),
    "wrong issuer": token(iss="https://evil.test"),
    "no expiry": token(exp=None),
    "user claim outside the alphabet": token(sub="../../etc"),
    "user claim not a string": token(sub=42),
    "unsigned (alg none)": jwt.encode({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": 2**31}, None, "none"),
    "unknown API key": "trk_0123456789abcdef_" + "A" * 43,
}


@pytest.mark.parametrize("case", sorted(BAD_BEARERS))
def test_bad_bearers_get_401_with_a_www_authenticate_challenge(served: Served, case: str) -> None:
    response = _post(served.url, BAD_BEARERS[case])
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge


def test_a_revoked_api_key_gets_401(served: Served) -> None:
    assert _post(served.url, served.revoked_key).status_code == 401
    assert _post(served.url, served.bob_key).status_code == 200


def test_revoking_a_key_while_the_server_runs_applies_to_the_next_request(served: Served) -> None:
    """Users' doors are cached for a few seconds; authentication is not: revocation is at once."""
    with UserStore(served.store_url) as store:
        key = store.add_key("carol")
        assert _post(served.url, key).status_code == 200
        assert _post(served.url, key).status_code == 200  # carol's door is now cached
        store.revoke_key(store.keys("carol")[-1].key_id)
    assert _post(served.url, key).status_code == 401


def test_a_token_without_the_required_scope_gets_403(served: Served) -> None:
    response = _post(served.url, token(scope="other"))
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


def test_protected_resource_metadata_names_the_issuer(served: Served) -> None:
    base, path = served.url.rsplit("/", 1)
    response = httpx2.get(f"{base}/.well-known/oauth-protected-resource/{path}", timeout=30)
    assert response.status_code == 200
    meta = response.json()
    assert meta["resource"].rstrip("/") == served.url
    assert [s.rstrip("/") for s in meta["authorization_servers"]] == [ISSUER]
    assert meta["scopes_supported"] == [SCOPE]


async def _session(url: str, bearer: str, work: Any) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return await work(client)


async def _names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


def test_each_user_lists_the_allowlist_plus_only_their_own_tools(served: Served) -> None:
    alice = anyio.run(_session, served.url, token("alice"), _names)
    bob = anyio.run(_session, served.url, served.bob_key, _names)
    shared = set(SERVED.split(","))
    assert shared <= set(alice) and shared <= set(bob)
    alice_own, bob_own = set(alice) - shared, set(bob) - shared
    # Readable names, or the digest form (`user_-<id prefix>_tool_…`) for names too long to read.
    assert alice_own and all(n.startswith(("user_alice_tool_", "user_-alice")) for n in alice_own)
    assert bob_own and all(n.startswith(("user_bob_tool_", "user_-bob")) for n in bob_own)


def test_no_user_can_call_another_users_tools(served: Served) -> None:
    bob_names = anyio.run(_session, served.url, served.bob_key, _names)
    bobs = [n for n in bob_names if n.startswith("user_bob_tool_")]

    async def attempt(client: Client) -> list[Any]:
        return [await client.call_tool(n, {"text": "x", "a": 1, "b": 2}) for n in bobs]

    for result in anyio.run(_session, served.url, token("alice"), attempt):
        assert result.is_error and "not served" in result.content[0].text


def test_a_users_own_tool_answers_from_their_own_server(served: Served) -> None:
    async def add(client: Client) -> Any:
        # The host has a function named `add`, so alice's `add` is exposed service-qualified.
        (name,) = [n for n in await _names(client) if n.startswith("user_alice_tool_") and n.endswith("_add")]
        return await client.call_tool(name, {"a": 2, "b": 3})

    result = anyio.run(_session, served.url, token("alice"), add)
    assert not result.is_error and result.content[0].text == "5"


def test_built_ins_act_in_each_users_own_workspace(served: Served) -> None:
    async def write(client: Client) -> Any:
        return await client.call_tool("write_file", {"path": "mine.txt", "content": "alice's\n"})

    async def read(client: Client) -> Any:
        return await client.call_tool("read_file", {"path": "mine.txt"})

    assert not anyio.run(_session, served.url, token("alice"), write).is_error
    assert (served.workspaces / "alice" / "mine.txt").read_text() == "alice's\n"
    theirs = anyio.run(_session, served.url, served.bob_key, read)
    assert theirs.is_error and "alice's" not in theirs.content[0].text
    mine = anyio.run(_session, served.url, token("alice"), read)
    assert not mine.is_error and "alice's" in mine.content[0].text


def test_oversized_arguments_are_refused_with_the_limit(served: Served) -> None:
    async def big(client: Client) -> Any:
        return await client.call_tool("echo", {"text": "x" * 10_000})

    result = anyio.run(_session, served.url, token("alice"), big)
    assert result.is_error and "over this server's limit of 4096 bytes" in result.content[0].text


def test_a_flood_from_one_user_does_not_starve_another(served: Served) -> None:
    """alice fires more slow calls than her limit at once; bob's call is answered meanwhile."""
    outcomes: dict[str, Any] = {}

    async def flood(client: Client) -> list[Any]:
        results: list[Any] = []

        async def one() -> None:
            results.append(await client.call_tool("nap", {"seconds": 3}))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(one)
        return results

    async def bob(client: Client) -> Any:
        await anyio.sleep(0.5)  # while alice's calls hold their slots
        return await client.call_tool("echo", {"text": "still here"})

    async def both() -> None:
        async def run_flood() -> None:
            outcomes["alice"] = await _session(served.url, token("alice"), flood)

        async def run_bob() -> None:
            outcomes["bob"] = await _session(served.url, served.bob_key, bob)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_flood)
                tg.start_soon(run_bob)

    anyio.run(both)
    refused = [r for r in outcomes["alice"] if r.is_error]
    assert len(refused) >= 3 and all("calls running" in r.content[0].text for r in refused)
    assert sum(not r.is_error for r in outcomes["alice"]) >= 1
    assert not outcomes["bob"].is_error and outcomes["bob"].content[0].text == "still here"


def test_the_audit_log_has_a_line_per_call_and_no_argument_values(served: Served) -> None:
    secret = "sk-live-DO-NOT-LOG"

    async def calls(client: Client) -> None:
        await client.call_tool("echo", {"text": secret})
        await client.call_tool("bash", {"command": "id"})  # not served: refused, still audited
        (own,) = [n for n in await _names(client) if n.startswith("user_alice_tool_") and n.endswith("_add")]
        await client.call_tool(own, {"a": 1, "b": 2})

    anyio.run(_session, served.url, token("alice"), calls)
    text = served.audit.read_text()
    assert secret not in text
    records = [json.loads(line) for line in text.splitlines()]
    echo = [r for r in records if r["tool"] == "echo" and r["user"] == "alice" and r["outcome"] == "ok"]
    assert echo and echo[-1]["argument_names"] == ["text"] and echo[-1]["level"] == "function"
    assert echo[-1]["result_chars"] == len(secret)
    assert any(r["tool"] == "bash" and r["outcome"] == "refused" and r["level"] is None for r in records)
    own = [r for r in records if r["tool"].startswith("user_alice_tool_") and r["outcome"] == "ok"]
    assert own and (own[-1]["level"], own[-1]["server"]) == ("user_mcp", "notes")
    assert echo[-1]["server"] is None


def test_http_without_auth_refuses_a_non_loopback_address() -> None:
    proc = run_cli("serve", "--transport", "http", "--host", "0.0.0.0", "--port", "0", "--functions", "read_file")
    assert proc.returncode == 2
    assert "without authentication" in proc.stderr and "loopback" in proc.stderr


def test_every_loopback_address_gets_the_rebinding_guard() -> None:
    with http_server(["--host", "127.0.0.2", "--functions", "read_file"]) as url:
        assert url.startswith("http://127.0.0.2:")
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        accept = {"Accept": "application/json, text/event-stream"}
        foreign = httpx2.post(url, json=body, headers={**accept, "Host": "evil.example"}, timeout=30)
        assert foreign.status_code in (403, 421), foreign.text
        own = httpx2.post(url, json=body, headers=accept, timeout=30)
        assert own.status_code != 421 and own.status_code != 403, own.text


def test_the_listener_is_tcp_so_responses_are_not_delayed() -> None:
    """asyncio sets TCP_NODELAY on accepted sockets only when the listener's proto is TCP."""
    sock = bind_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_users_command_manages_the_registry_without_printing_secrets(tmp_path: Path) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'u.db'}"]
    added = run_cli("users", *store, "add", "dora", "--key")
    assert added.returncode == 0, added.stderr
    key = added.stdout.split()[-1]
    assert key.startswith("trk_")
    config = json.dumps({"command": "srv", "env": {"TOKEN": "hush-hush"}})
    assert run_cli("users", *store, "servers", "add", "dora", "notes", config).returncode == 0
    listing = run_cli("users", *store, "servers", "list", "dora")
    assert "hush-hush" not in listing.stdout and '"TOKEN": "***"' in listing.stdout
    keys = run_cli("users", *store, "keys", "list", "dora")
    assert key not in keys.stdout and "active" in keys.stdout
    key_id = keys.stdout.split()[0]
    assert run_cli("users", *store, "keys", "revoke", key_id).returncode == 0
    with UserStore(f"sqlite:///{tmp_path / 'u.db'}") as s:
        assert s.user_for_key(key) is None
    bad = run_cli("users", *store, "add", "no/slashes")
    assert bad.returncode == 2 and bad.stderr.startswith("toolroute: error:")
    assert run_cli("users", *store, "list").stdout == "dora\tkeys=0\tservers=notes\n"
    second = run_cli("users", *store, "keys", "add", "dora")
    assert second.returncode == 0 and second.stdout.startswith("trk_")
    not_json = run_cli("users", *store, "servers", "add", "dora", "more", "{nope")
    assert not_json.returncode == 2 and "not valid JSON" in not_json.stderr
    removed = run_cli("users", *store, "servers", "remove", "dora", "notes")
    assert (removed.returncode, removed.stdout) == (0, "removed server notes of user dora\n")
    assert run_cli("users", *store, "servers", "remove", "dora", "notes").returncode == 2
    assert run_cli("users", *store, "remove", "dora").stdout == "removed user dora\n"
    assert run_cli("users", *store, "list").stdout == ""


def test_a_name_shown_as_the_hosts_function_runs_that_function_for_every_user(served: Served) -> None:
    """bob's own server also offers `echo`; the `echo` bob was shown is the host's, and runs it."""

    async def echo(client: Client) -> Any:
        return await client.call_tool("echo", {"text": "host"})

    result = anyio.run(_session, served.url, served.bob_key, echo)
    assert not result.is_error and result.content[0].text == "host"


def test_sigterm_ends_a_running_command_and_stops_the_server_within_a_bound(tmp_path: Path) -> None:
    marker = f"toolroute-sigterm-{time.monotonic_ns()}"
    args = ["--functions", "bash", "--workspace", str(tmp_path)]
    with http_server_process(args) as (proc, url):

        async def long_call() -> None:
            async with Client(url) as client:
                await client.call_tool("bash", {"command": f"sleep 120; echo {marker}", "timeout": 300})

        def run() -> None:
            with contextlib.suppress(BaseException):  # the server goes away mid-call: expected
                anyio.run(long_call)

        caller = threading.Thread(target=run, daemon=True)
        caller.start()
        deadline = time.monotonic() + 60
        while not processes_with(marker):
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) is not None  # stopped within the bound, call or not
    deadline = time.monotonic() + 15
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(marker) == []
