"""Streamable HTTP and SSE servers on 127.0.0.1, including a server restart under a live session."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from _mcp_helpers import HttpServer, http_server

from toolroute import ToolRouter
from toolroute.errors import ToolExecutionError, ToolTimeoutError
from toolroute.mcp import McpGateway


@pytest.fixture(scope="module")
def web() -> Iterator[HttpServer]:
    with http_server("web") as server:
        yield server


def test_streamable_http_round_trip_through_the_router(web: HttpServer) -> None:
    assert web.url.startswith("http://127.0.0.1:")
    with McpGateway({"web": {"url": web.url, "timeout": 2}}) as gw:
        router = ToolRouter(gateway=gw)
        assert router.invoke("echo", {"text": "over http"}) == "web:over http"
        assert router.execute("add", {"a": 20, "b": 22}).trace["structured_content"] == {"result": 42}
        with pytest.raises(ToolExecutionError, match="nope"):
            router.invoke("fail", {"message": "nope"})
        with pytest.raises(ToolTimeoutError):
            router.invoke("slow", {"seconds": 30})
        assert router.invoke("add", {"a": 1, "b": 1}) == "2"


def test_async_calls_over_http_from_a_foreign_loop(web: HttpServer) -> None:
    async def main() -> list[str]:
        async with McpGateway({"web": {"url": web.url}}, eager=True) as gw:
            outs = await asyncio.gather(*(gw.acall_tool("add", {"a": i, "b": i}) for i in range(10)))
            return [o.text for o in outs]

    assert asyncio.run(main()) == [str(2 * i) for i in range(10)]


def test_server_restart_is_reinitialised_transparently() -> None:
    server = HttpServer("restart").start()
    try:
        with McpGateway({"r": {"url": server.url}}) as gw:
            before = int(gw.call_tool("pid").text)
            connects = gw._services["r"].connection.connects
            server.stop()
            server.start()  # same port, new process: our session id is unknown there
            after = int(gw.call_tool("pid").text)  # "Session not found" -> re-initialise -> retry
            assert after != before
            assert gw._services["r"].connection.connects == connects + 1
    finally:
        server.stop()


def test_unreachable_http_server_is_a_clear_error() -> None:
    dead = HttpServer("dead")  # a free port nobody listens on
    with (
        McpGateway({"dead": {"url": dead.url, "connectTimeout": 5}}) as gw,
        pytest.raises(ToolExecutionError, match="'dead'"),
    ):
        gw.get_global_mcp_tools(["dead"])


def test_sse_transport() -> None:
    with http_server("old", sse=True) as server, McpGateway({"old": {"url": server.url}}) as gw:
        assert gw.call_tool("echo", {"text": "sse"}).text == "old:sse"
