"""The router as an MCP server, on the official SDK's low-level `Server`.

Only the served exposure is reachable: `tools/call` runs the very tool this server advertised
under that name and refuses anything else before the router sees it. (AI4J's server passed any
name to its router, so a client could reach tools it was never shown, bash included.)
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from starlette.routing import Route

from toolroute import __version__
from toolroute.adapters.allowlist import CallOutcome, ExposedTools
from toolroute.context import builtin_tool_context
from toolroute.errors import ToolError

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.auth.settings import AuthSettings

    from toolroute.serve.audit import AuditLog
    from toolroute.serve.limits import LimitBook
    from toolroute.serve.tenants import Tenancy
    from toolroute.types import Tool

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

    def call_refusal(self, name: str) -> types.CallToolResult:
        outcome = self.refusal(name)
        return types.CallToolResult(content=[types.TextContent(text=outcome.text)], is_error=True)


class ServedRequests(Protocol):
    """What a server needs to answer one request: the caller's tools, and a call on their behalf."""

    async def list_tools(self, ctx: ServerContext) -> list[types.Tool]: ...

    async def call_tool(
        self, ctx: ServerContext, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult: ...

    def input_schema(self, name: str) -> Mapping[str, Any] | None: ...


class FixedDoor:
    """One allowlist for every request: stdio, or HTTP for a single user."""

    def __init__(self, served: ServedTools) -> None:
        self.served = served

    async def list_tools(self, ctx: ServerContext) -> list[types.Tool]:
        return self.served.mcp_tools()

    async def call_tool(
        self, ctx: ServerContext, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        return await self.served.call(name, arguments)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        return self.served.input_schema(name)


AFFINITY_HEADER = "x-toolroute-user"


def request_user(ctx: ServerContext) -> str | None:
    """The user id the bearer token of this HTTP request was verified for (None without auth)."""
    request = getattr(ctx, "request", None)
    user = None if request is None else request.scope.get("user")
    token = getattr(user, "access_token", None)
    return None if token is None else token.subject


def affinity_claim(ctx: ServerContext) -> str | None:
    """The user a load balancer hashed this request on (the `X-Toolroute-User` header), if any."""
    request = getattr(ctx, "request", None)
    return None if request is None else request.headers.get(AFFINITY_HEADER)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class TenantDoors:
    """Per-request identity: each request lists and calls the tools of the user its token names.

    A request that reaches here without a verified user (which the auth middleware prevents)
    is refused rather than served as anybody.
    """

    def __init__(
        self,
        tenancy: Tenancy,
        *,
        limits: LimitBook | None = None,
        audit: AuditLog | None = None,
        authenticated: bool = True,
        fixed_user: str | None = None,
    ) -> None:
        self.tenancy = tenancy
        self.limits = limits
        self.audit = audit
        self.authenticated = authenticated
        self.fixed_user = fixed_user

    def _user(self, ctx: ServerContext) -> str | None:
        if not self.authenticated:
            return self.fixed_user
        user = request_user(ctx)
        if user is None:
            raise ToolError("this request carries no verified identity")
        claimed = affinity_claim(ctx)
        if claimed is not None and claimed != user:
            # The header only steers the load balancer; a request that names another user
            # there is refused, so the header can never be used to land beside another tenant.
            raise ToolError(f"the {AFFINITY_HEADER} header does not name the authenticated user")
        return user

    async def list_tools(self, ctx: ServerContext) -> list[types.Tool]:
        try:
            user = self._user(ctx)
        except ToolError as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None
        door = await self._door(user)
        return door.mcp_tools()

    async def call_tool(
        self, ctx: ServerContext, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        """One call, and exactly one audit line for it on every path: done, failed, refused
        (identity, allowlist, limits) or cancelled (by the client or its disconnect)."""
        started = time.monotonic()
        user: str | None = None
        result: types.CallToolResult | None = None
        outcome, tool = "cancelled", None
        try:
            try:
                user = self._user(ctx)
            except ToolError as exc:
                user = request_user(ctx)
                result, outcome = _error(str(exc)), "refused"
                return result
            result, outcome, tool = await self._call(user, name, arguments)
            return result
        except Exception:
            outcome = "error"
            raise
        finally:
            if self.audit is not None:
                self._audit(user, name, arguments, started, outcome, result, tool)

    def _audit(
        self,
        user: str | None,
        name: str,
        arguments: Mapping[str, Any] | None,
        started: float,
        outcome: str,
        result: types.CallToolResult | None,
        tool: Tool | None,
    ) -> None:
        assert self.audit is not None
        content = () if result is None else result.content
        self.audit.record(
            user=user,
            tool=name,
            started=started,
            outcome=outcome,
            result_chars=sum(len(c.text) for c in content if isinstance(c, types.TextContent)),
            arguments=arguments,
            level=None if tool is None else routing_level(tool),
            server=None if tool is None else getattr(tool, "service_id", None),
        )

    async def _call(
        self, user: str | None, name: str, arguments: Mapping[str, Any] | None
    ) -> tuple[types.CallToolResult, str, Tool | None]:
        """The result, the audit outcome, and the tool that ran (None when refused)."""
        door = await self._door(user)
        tool = door.exposure.get(name)  # the very tool this user was shown under `name`
        if tool is None:
            return door.call_refusal(name), "refused", None
        try:
            if self.limits is not None:
                self.limits.check_arguments(arguments)
            context = self.tenancy.context(user)
            with self._slot(user):
                if context is None:
                    result = await door.call(name, arguments)
                else:
                    with builtin_tool_context(context):
                        result = await door.call(name, arguments)
        except ToolError as exc:
            return _error(str(exc)), "refused", None
        return result, "error" if result.is_error else "ok", tool

    async def _door(self, user: str | None) -> ServedTools:
        # A fresh cached door is served on the loop; reading the registry goes to a thread.
        door = self.tenancy.fresh_door(user)
        return door if door is not None else await anyio.to_thread.run_sync(self.tenancy.door, user)

    def _slot(self, user: str | None) -> Any:
        import contextlib

        if self.limits is None or user is None:
            return contextlib.nullcontext()
        return self.limits.call(user)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        # The SDK validates arguments against this before calling; the schema of a name is the
        # same for every user who can see it (user-level names are unique to their user).
        return None


def routing_level(tool: Tool) -> str:
    """The audit's routing level of a tool: its kind's name (`builtin`, `user_mcp`, `local_mcp`,
    `function`, `global_mcp`), from the one definition of kinds (the Rust `ToolKind`)."""
    return tool.kind.name.lower()


def build_server(served: ServedTools | ServedRequests, name: str = "toolroute") -> Server[Any]:
    """An MCP `Server` that lists and calls exactly what `served` allows the caller."""
    requests: ServedRequests = FixedDoor(served) if isinstance(served, ServedTools) else served

    async def on_list_tools(ctx: ServerContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await requests.list_tools(ctx))

    async def on_call_tool(ctx: ServerContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await requests.call_tool(ctx, params.name, params.arguments)

    return Server(
        name,
        version=__version__,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=requests.input_schema,
    )


async def serve_stdio(served: ServedTools) -> None:
    """Serve over this process's stdin/stdout until the client closes stdin."""
    server = build_server(served)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free port, read back from the socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listener says it is TCP, and without it every response waits ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def rebinding_guard(host: str) -> TransportSecuritySettings | None:
    """The DNS-rebinding guard for a server on any loopback address (all of 127.0.0.0/8 and ::1):
    only requests naming a loopback host (and, from browsers, a loopback origin) are served."""
    if not is_loopback(host):
        return None
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    hosts = dict.fromkeys([shown, "127.0.0.1", "localhost", "[::1]"])
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )


class HttpAuth:
    """Bearer authentication of the HTTP endpoint, as an MCP resource server (RFC 9728)."""

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        issuer_url: str,
        resource_url: str,
        required_scopes: list[str] | None = None,
    ) -> None:
        from mcp.server.auth.settings import AuthSettings

        self.verifier = verifier
        self.settings: AuthSettings = AuthSettings(
            issuer_url=issuer_url,  # type: ignore[arg-type]  # pydantic parses the URL
            resource_server_url=resource_url,  # type: ignore[arg-type]
            required_scopes=required_scopes or None,
            # The verifier checks the audience itself (JWT `aud`); API keys have none.
            validate_token_resource=False,
        )


HEALTH_PATH = "/healthz"  # for load balancers' checks: no auth, no MCP, just "serving"


async def _health(request: Any) -> Any:
    from starlette.responses import PlainTextResponse

    return PlainTextResponse("ok")


SHUTDOWN_GRACE_SECONDS = 5.0  # a signal stops the server within this bound, calls or not


async def serve_http(
    served: ServedTools | ServedRequests,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    on_ready: Callable[[str], None] | None = None,
    *,
    sock: socket.socket | None = None,
    auth: HttpAuth | None = None,
) -> None:
    """Serve streamable HTTP on `sock` (or a new socket bound to host:port); `on_ready(url)` is
    called once the socket listens. With `auth`, every request needs a valid bearer token and
    the server is stateless (any replica can answer any request)."""
    import uvicorn  # an `mcp` dependency, only needed here

    server = build_server(served)
    app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=rebinding_guard(host),
        stateless_http=auth is not None,
        auth=None if auth is None else auth.settings,
        token_verifier=None if auth is None else auth.verifier,
        custom_starlette_routes=[Route(HEALTH_PATH, _health, methods=["GET"])],
    )
    sock = sock if sock is not None else bind_socket(host, port)
    http = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS))
    )
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
