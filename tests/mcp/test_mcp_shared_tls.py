"""Every upstream HTTP connection shares one TLS context (`mcp/connection.py`): an HTTP client
made without one loads the CA bundle into a context of its own, about 900 KiB each, which a
server connecting a thousand users' servers would hold a thousand times. And the shared clients
still talk to a real server: a gateway with two users on one streamable-HTTP server calls both."""

from __future__ import annotations

from _mcp_helpers import http_server

from toolroute.mcp import McpGateway
from toolroute.mcp.connection import _http_client


def test_clients_share_one_tls_context() -> None:
    clients = [_http_client() for _ in range(3)]
    contexts = {id(c._transport._pool._ssl_context) for c in clients}  # type: ignore[attr-defined]
    assert len(contexts) == 1


def test_two_users_connections_over_the_shared_context_work() -> None:
    with http_server("shared") as server:
        gateway = McpGateway()
        try:
            for user in ("u1", "u2"):
                gateway.add_user_server(user, "mine", {"url": server.url})
            assert gateway.call_user_tool("u1", "add", {"a": 1, "b": 2}).text == "3"
            assert gateway.call_user_tool("u2", "add", {"a": 2, "b": 2}).text == "4"
        finally:
            gateway.close()
