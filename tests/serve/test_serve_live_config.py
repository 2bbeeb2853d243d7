"""Live configuration across replicas (issue 43): two `toolroute serve` replicas share a real
PostgreSQL registry; a user's own MCP server is changed (another URL) and then removed through
the registry, as `toolroute users servers add --replace` on a third machine would; the very next
request on either replica uses what the registry now says, without a restart. The upstreams are
two real MCP servers over HTTP on 127.0.0.1 that answer with their own names."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import anyio
from _mcp_helpers import http_server
from _postgres import postgres_server
from _serve_helpers import TOOLS_MODULE, served_http
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.store import UserStore

TOOL = "user_alice_tool_echo"


async def _ask(url: str, key: str) -> tuple[list[str], str | None]:
    """The tools alice sees on one replica, and what her server's echo answers (None: not listed)."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        if TOOL not in names:
            return names, None
        result = await client.call_tool(TOOL, {"text": "x"})
        assert not result.is_error, result
        text: Any = result.content[0]
        return names, text.text


def test_a_users_changed_server_is_used_by_the_next_request_on_every_replica() -> None:
    with ExitStack() as stack:
        dsn = stack.enter_context(postgres_server())
        first = stack.enter_context(http_server("first"))
        second = stack.enter_context(http_server("second"))
        with UserStore(dsn) as store:
            store.add_user("alice")
            key = store.add_key("alice")
            store.add_server("alice", "notes", {"url": first.url})
        args = ["--modules", TOOLS_MODULE, "--functions", "echo", "--api-keys", "--store", dsn]
        replicas = [stack.enter_context(served_http(args)).url for _ in range(2)]

        for url in replicas:
            assert anyio.run(_ask, url, key)[1] == "first:x"
        with UserStore(dsn) as elsewhere:  # a third process edits the registry
            elsewhere.add_server("alice", "notes", {"url": second.url}, replace=True)
        for url in replicas:  # the very next request on each replica, no wait
            assert anyio.run(_ask, url, key)[1] == "second:x"
        with UserStore(dsn) as elsewhere:
            elsewhere.remove_server("alice", "notes")
        for url in replicas:
            names, answer = anyio.run(_ask, url, key)
            assert answer is None and "echo" in names  # her server's tools are gone, the shared one stays
        with UserStore(dsn) as elsewhere:  # and back, under the first URL again
            elsewhere.add_server("alice", "notes", {"url": first.url})
        for url in reversed(replicas):
            assert anyio.run(_ask, url, key)[1] == "first:x"
