"""The router as an MCP server, on the official SDK's low-level `Server`.

Only the served exposure is reachable: `tools/call` runs the very tool this server advertised
under that name and refuses anything else before the router sees it. (AI4J's server passed any
name to its router, so a client could reach tools it was never shown, bash included.)
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server

from toolroute import __version__
from toolroute.adapters.allowlist import CallOutcome, ExposedTools

ServerContext = Any  # mcp's ServerRequestContext; its type parameters add nothing here


class ServedTools(ExposedTools):
    """The fixed allowlist one server exposes, and the only door to the router."""

    def refusal(self, name: str) -> CallOutcome:
        return CallOutcome(f"tool {name!r} is not served by this server", is_error=True)

    @cached_property
    def _listing(self) -> list[types.Tool]:
        tools = []
        for name, fn in self.definitions.items():
            traits = self.exposure.tools[name].traits
            tools.append(
                types.Tool(
                    name=name,
                    description=fn.get("description") or None,
                    input_schema=fn["parameters"],
                    annotations=types.ToolAnnotations(
                        read_only_hint=traits.read_only, idempotent_hint=traits.idempotent
                    ),
                )
            )
        return tools

    def mcp_tools(self) -> list[types.Tool]:
        """The `tools/list` answer, built once: the allowlist is fixed for the server's life."""
        return list(self._listing)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        fn = self.definitions.get(name)
        return None if fn is None else fn["parameters"]

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        outcome = await self.aexecute(name, dict(arguments or {}))
        return types.CallToolResult(content=[types.TextContent(text=outcome.text)], is_error=outcome.is_error)


def build_server(served: ServedTools, name: str = "toolroute") -> Server[Any]:
    """An MCP `Server` that lists and calls exactly `served`."""

    async def on_list_tools(ctx: ServerContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=served.mcp_tools())

    async def on_call_tool(ctx: ServerContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await served.call(params.name, params.arguments)

    return Server(
        name,
        version=__version__,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=served.input_schema,
    )


async def serve_stdio(served: ServedTools) -> None:
    """Serve over this process's stdin/stdout until the client closes stdin."""
    server = build_server(served)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free port, read back from the socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def http_url(sock: socket.socket, path: str) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


async def serve_http(
    served: ServedTools,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    on_ready: Callable[[str], None] | None = None,
    *,
    sock: socket.socket | None = None,
) -> None:
    """Serve streamable HTTP on `sock` (or a new socket bound to host:port); `on_ready(url)` is
    called once the socket listens."""
    import uvicorn  # an `mcp` dependency, only needed here

    server = build_server(served)
    # host only decides the SDK's DNS-rebinding guard (on for loopback); binding is ours.
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    sock = sock if sock is not None else bind_socket(host, port)
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # uvicorn handles SIGINT/SIGTERM while it serves, then re-raises the signal; these
        # handlers make that re-raise (and a signal during startup) a graceful stop instead.
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: setattr(http, "should_exit", True))

    async def announce() -> None:
        # Only once uvicorn has started (and installed its signal handlers) is the server up.
        while not http.started:
            await anyio.sleep(0.01)
        if on_ready is not None:
            on_ready(http_url(sock, path))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await http.serve(sockets=[sock])
            tg.cancel_scope.cancel()
    finally:
        sock.close()
        for previous_signum, handler in previous.items():
            signal.signal(previous_signum, handler)


def run(
    served: ServedTools,
    transport: str = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Blocking entry point: serve until the client (stdio) or a signal (HTTP) ends it.

    For HTTP the socket is bound before serving starts, so an address in use raises OSError here.
    """
    if transport == "stdio":
        anyio.run(serve_stdio, served)
    elif transport == "http":
        sock = bind_socket(host, port)
        anyio.run(lambda: serve_http(served, host, port, path, on_ready, sock=sock))
    else:
        raise ValueError(f"unknown transport {transport!r}; expected 'stdio' or 'http'")
