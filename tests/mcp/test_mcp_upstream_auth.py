"""The library's side of per-user upstream authorization (issue 58): `McpGateway.add_user_server
(..., auth=...)` with credentials the host implements. Until the host has a token, nothing reaches
the protected server, it lists only `authorize`, and every call raises the -32042 error carrying
the host's own link; once the host has one, the calls reach the server as that user; a token the
server refuses is handed back to the host, and with none left the link comes back."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS

from toolroute.errors import UpstreamRequestError
from toolroute.mcp import McpGateway
from toolroute.serve.upstream_oauth import protocol

PROTECTED = str(SERVERS / "protected_server.py")
REDIRECT = "http://127.0.0.1:9/callback"  # never opened: the code is read off the redirect
LINK = "https://host.example/connect?user=carol"


class HostCredentials:
    """What a host implements: its own token store (here, memory) and its own link."""

    def __init__(self) -> None:
        self.access: str | None = None
        self.rejections: list[str] = []

    async def token(self) -> str | None:
        return self.access

    async def rejected(self, token: str) -> str | None:
        self.rejections.append(token)
        self.access = None  # this host does not refresh: the user is asked again
        return None

    def authorization_url(self) -> str:
        return LINK


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, PROTECTED, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the protected server did not start"
            try:
                if httpx2.get(f"{base}/.well-known/oauth-authorization-server", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _authorize(server_url: str, user: str) -> str:
    endpoints = await protocol.discover(server_url, {}, REDIRECT)
    pkce = protocol.pkce()
    where = protocol.authorization_url(endpoints, REDIRECT, "st", pkce.code_challenge)
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        login = await browser.get(where)
        pending = parse_qs(urlparse(login.headers["location"]).query)["pending"][0]
        origin = f"{urlparse(where).scheme}://{urlparse(where).netloc}"
        form = {"pending": pending, "username": user, "password": f"{user}-pw"}
        done = await browser.post(f"{origin}/login", data=form)
    back = parse_qs(urlparse(done.headers["location"]).query)
    assert back["state"] == ["st"]
    tokens = await protocol.exchange_code(endpoints, back["code"][0], pkce.code_verifier, REDIRECT)
    return tokens.access_token


def _seen(base: str) -> list[object]:
    return list(httpx2.get(f"{base}/admin/seen", timeout=10).json())


def test_a_host_authorizes_its_user_through_its_own_credentials(upstream: str) -> None:
    host = HostCredentials()
    with McpGateway() as gateway:
        gateway.add_user_server("carol", "gh", {"url": f"{upstream}/mcp", "oauth": {}}, auth=host)
        with pytest.raises(UpstreamRequestError) as asked:
            gateway.call_user_tool("carol", "authorize")
        error = asked.value.trace["mcp_error"]
        assert error["code"] == types.URL_ELICITATION_REQUIRED
        assert [e["url"] for e in error["data"]["elicitations"]] == [LINK]
        assert "'gh'" in str(asked.value) and LINK in str(asked.value)  # what a model reads
        assert [t.name for t in gateway.user_tools(["gh"], "carol")] == ["user_carol_tool_authorize"]
        assert _seen(upstream) == []

        host.access = anyio.run(_authorize, f"{upstream}/mcp", "carol")
        said = gateway.call_user_tool("carol", "authorize").text
        assert "authorized" in said
        gateway.refresh("carol")
        assert gateway.call_user_tool("carol", "whoami").text == "you are carol"
        assert _seen(upstream) == [{"tool": "whoami", "user": "carol"}]

        # The server refuses the token (revoked): the host hears of it, and the link comes back.
        revoked = host.access
        httpx2.post(f"{upstream}/admin/revoke", params={"user": "carol"}, timeout=10)
        with pytest.raises(UpstreamRequestError) as again:
            gateway.call_user_tool("carol", "whoami")
        assert again.value.trace["mcp_error"]["code"] == types.URL_ELICITATION_REQUIRED
        assert host.rejections == [revoked]
        assert _seen(upstream) == [{"tool": "whoami", "user": "carol"}]


def test_auth_needs_a_streamable_http_server() -> None:
    from toolroute.errors import ToolRegistrationError

    with McpGateway() as gateway, pytest.raises(ToolRegistrationError, match="streamable HTTP"):
        gateway.add_user_server("carol", "local", {"command": "true"}, auth=HostCredentials())
