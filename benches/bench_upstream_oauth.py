"""A call to a user's OAuth-protected upstream with a valid stored token against the same call
with the token as a static header (issue 58: the token lookup and decryption must not show).

Both sides call `whoami` on the same protected MCP server (tests/mcp_servers/protected_server.py,
the `mcp` SDK's auth pieces) with the same access token, through one `McpGateway`: one user's
server configured with `headers: {"Authorization": "Bearer ..."}`, another's with `oauth` and
the registry-backed credentials served mode uses (`serve/upstream_oauth/credentials.py`: the
token read from an encrypted SQLite registry once, then kept in memory until it expires).
Interleaved by benches/_interleave.py, which checks both answer "you are alice".

Run: python benches/bench_upstream_oauth.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from _interleave import compare
from cryptography.fernet import Fernet

from toolroute.mcp import McpGateway
from toolroute.serve.secrets import KEY_ENV
from toolroute.serve.store import UserStore
from toolroute.serve.upstream_oauth import protocol
from toolroute.serve.upstream_oauth.credentials import Authorizations

PROTECTED = Path(__file__).resolve().parents[1] / "tests" / "mcp_servers" / "protected_server.py"
CALLS = 50
REDIRECT = "http://127.0.0.1:9/oauth/callback"  # never opened: the code is read off the redirect


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(url: str) -> None:
    for _ in range(600):
        try:
            if httpx2.get(url, timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


async def tokens_of(server_url: str, user: str) -> tuple[protocol.Tokens, protocol.Endpoints]:
    """The whole authorization of `user`, as a browser would do it."""
    endpoints = await protocol.discover(server_url, {}, REDIRECT)
    pkce = protocol.pkce()
    where = protocol.authorization_url(endpoints, REDIRECT, "s", pkce.code_challenge)
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        login = await browser.get(where)
        pending = parse_qs(urlparse(login.headers["location"]).query)["pending"][0]
        origin = f"{urlparse(where).scheme}://{urlparse(where).netloc}"
        done = await browser.post(
            f"{origin}/login", data={"pending": pending, "username": user, "password": f"{user}-pw"}
        )
    code = parse_qs(urlparse(done.headers["location"]).query)["code"][0]
    return await protocol.exchange_code(endpoints, code, pkce.code_verifier, REDIRECT), endpoints


async def per_lookup(credentials: object) -> float:
    """Microseconds one token lookup costs on the path every request takes (the cached token)."""
    token = credentials.token  # type: ignore[attr-defined]
    await token()  # the one registry read and decryption, not counted
    start = time.perf_counter()
    for _ in range(100_000):
        await token()
    return (time.perf_counter() - start) * 10


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    os.environ[KEY_ENV] = Fernet.generate_key().decode()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(PROTECTED), "--port", str(port), "--lifetime", "3600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_up(f"{base}/.well-known/oauth-authorization-server")
        url = f"{base}/mcp"
        tokens, endpoints = anyio.run(tokens_of, url, "alice")
        with tempfile.TemporaryDirectory() as tmp, UserStore(f"sqlite:///{tmp}/users.db") as store:
            for user in ("plain", "oauth"):
                store.add_user(user)
            store.add_server("oauth", "gh", {"url": url, "oauth": {}})
            stored = {
                "access_token": tokens.access_token,
                "refresh_token": tokens.refresh_token,
                "expires_at": tokens.expires_at,
                "endpoints": endpoints.to_json(),
            }
            store.put_upstream_tokens("oauth", "gh", "g1", json.dumps(stored))
            credentials = Authorizations(store, "http://127.0.0.1:9").credentials("oauth", "gh")
            with McpGateway() as gateway:
                gateway.add_user_server(
                    "plain", "gh", {"url": url, "headers": {"Authorization": f"Bearer {tokens.access_token}"}}
                )
                gateway.add_user_server("oauth", "gh", {"url": url, "oauth": {}}, auth=credentials)

                def calls(user: str) -> str:
                    texts = {gateway.call_user_tool(user, "whoami").text for _ in range(CALLS)}
                    return " | ".join(sorted(texts))

                assert calls("oauth") == "you are alice", calls("oauth")
                lookup = anyio.run(per_lookup, credentials)
                print(f"  credentials.token() with a valid token in memory: {lookup:.2f} us")
                compare(
                    f"upstream OAuth: {CALLS} calls of a protected server's tool through McpGateway",
                    ("static Authorization header", lambda: calls("plain")),
                    {"stored OAuth token (registry, encrypted)": lambda: calls("oauth")},
                    rounds,
                )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
