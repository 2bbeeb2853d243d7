"""The router as an MCP server, on the official SDK's low-level `Server`.

Only the served exposure is reachable: `tools/call` runs the very tool this server advertised
under that name and refuses anything else before the router sees it. (AI4J's server passed any
name to its router, so a client could reach tools it was never shown, bash included.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

from toolroute import __version__
from toolroute.asking import asking
from toolroute.cancellation import process_ending
from toolroute.mcp.freshness import Freshness, of_result
from toolroute.progress import ProgressSink, reporting
from toolroute.serve.approval import AskForApproval, approving, carried, peel
from toolroute.serve.approval import input_required as approval_required
from toolroute.serve.asking import PassInputRequired, input_required, is_modern, served_asker
from toolroute.serve.bridge import Bridge, is_bridged, resume
from toolroute.serve.doors import FixedDoor, Listing, ServedRequests, ServedTools, ServerContext
from toolroute.serve.prebuilt import answer_with, prebuilt_results
from toolroute.serve.shutdown import Shutdown
from toolroute.serve.tasks import CAPABILITY as TASKS_CAPABILITY
from toolroute.serve.tasks import TaskStore, offered, tools_with_task_support

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.auth.settings import AuthSettings

    from toolroute.serve.connections import ConnectionLimits
    from toolroute.serve.recycle import Recycle


R = TypeVar("R")


def descriptor_limit() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def progress_sink(ctx: ServerContext, bridge: Bridge | None = None) -> ProgressSink | None:
    """A sink for the call's progress when the client sent a `progressToken` (else None); a
    bridged call's goes to whichever of the client's requests waits for it (its retries)."""
    # The SDK hands the request's `_meta` over by field name; its request-scoped session sends
    # progress against the caller's token on the request's own channel.
    if (ctx.meta or {}).get("progress_token") is None:
        return None
    return ProgressSink(ctx.session.report_progress if bridge is None else bridge.report)


def build_server(
    served: ServedTools | ServedRequests, name: str = "toolroute", *, list_changes: bool = True
) -> _ServedServer:
    """An MCP `Server` that lists and calls exactly what `served` allows the caller. With
    `list_changes` it declares `tools.listChanged` (for connections that stay open). Calls run as
    tasks while `server.tasks.running()` is entered around serving (`serve_stdio`, `serve_http`)."""
    requests: ServedRequests = FixedDoor(served) if isinstance(served, ServedTools) else served

    # Caching hints: the upstream servers' own where a listing is theirs; shared caches may keep
    # it only when every caller sees the same, never a user's own view (served mode with auth).
    one_view = requests.one_view

    def hints(fresh: Freshness) -> dict[str, Any]:
        return (fresh if one_view else fresh.private()).fields()

    async def on_list_tools(ctx: ServerContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = await requests.list_tools(ctx)
        if isinstance(tools, Listing):  # an exposure's own listing: its wire form is ready
            fields = hints(tools.served.listing_freshness())
            answer = types.ListToolsResult(tools=tools, **fields)
            wire = tools.served.listing_wire(ctx.protocol_version)
            return answer_with(wire, types.ListToolsResult(tools=[], **fields), answer)
        # With what a search found: this connection's own.
        return types.ListToolsResult(tools=tools_with_task_support(tools, ctx.protocol_version))

    async def on_call_tool(ctx: ServerContext, params: types.CallToolRequestParams) -> Any:
        if is_bridged(params.request_state):  # a retry answering an upstream's question mid-call
            return wire_result(ctx, await resume(ctx, params).outcome(ctx))
        if not is_modern(ctx):
            return wire_result(ctx, await calling(ctx, params))
        # A 2026-07-28 client's call may outlive this request, parked while a handshake-era
        # upstream waits for the client's answer (serve/bridge.py); its result is put in wire
        # form for whichever request gets it.
        bridge = Bridge(ctx, params.name, params.arguments)
        bridge.start(calling(ctx, params, bridge))
        return wire_result(ctx, await bridge.outcome(ctx))

    async def calling(ctx: ServerContext, params: types.CallToolRequestParams, bridge: Bridge | None = None) -> Any:
        sink = progress_sink(ctx, bridge)
        # A policy's question to this client, if the call is a retry answering it (serve/approval.py).
        approval, params = peel(ctx, params)
        # What an upstream server asks during the call goes to this client (serve/asking.py).
        try:
            with asking(served_asker(ctx, params, None if bridge is None else bridge.ask)), approving(approval):
                if sink is None:
                    return await requests.call_tool(ctx, params.name, params.arguments)
                try:
                    with reporting(sink):
                        return await requests.call_tool(ctx, params.name, params.arguments)
                finally:
                    await sink.aclose()
        except AskForApproval as asked:
            return approval_required(ctx, approval, asked)
        except PassInputRequired as passed:
            return carried(ctx, approval, input_required(ctx, params.name, passed))

    # What the upstream servers offer besides tools passes through the caller's allowlist.
    async def on_list_prompts(
        ctx: ServerContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        async with requests.offering(ctx) as door:
            prompts = await door.list_prompts()
            return types.ListPromptsResult(prompts=prompts, **hints(door.offer_freshness("prompts")))

    async def on_get_prompt(ctx: ServerContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        async with requests.offering(ctx) as door:
            return await door.get_prompt(params.name, params.arguments)

    async def on_list_resources(
        ctx: ServerContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        async with requests.offering(ctx) as door:
            resources = await door.list_resources()
            return types.ListResourcesResult(resources=resources, **hints(door.offer_freshness("resources")))

    async def on_list_resource_templates(
        ctx: ServerContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        async with requests.offering(ctx) as door:
            templates = await door.list_resource_templates()
            fresh = door.offer_freshness("resource_templates")
        return types.ListResourceTemplatesResult(resource_templates=templates, **hints(fresh))

    async def on_read_resource(ctx: ServerContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        async with requests.offering(ctx) as door:
            read = await door.read_resource(str(params.uri))
        # The upstream's own hints pass (the SDK keeps them on the model), private in served mode.
        return read if one_view else read.model_copy(update=hints(of_result(read)))

    server_class = _ListChangingServer if list_changes else _ServedServer
    server = server_class(
        name,
        version=__version__,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=requests.input_schema,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
    )
    server.requests = requests
    server.middleware.append(prebuilt_results)  # innermost: right around the SDK's serialisation
    # Any call may be run as a task (serve/tasks.py): its middleware goes just outside the above.
    server.tasks = TaskStore(getattr(requests, "task_limits", None), audit=getattr(requests, "audit", None))
    server.tasks.register(server)
    return server


_NO_CONTENT = types.CallToolResult(content=[])

# From this revision on a call's result is answered as dumped, without the SDK's check of the
# dump against the revision's schema: toolroute's results are built from the revision's own
# models, and the fields older revisions lack (structuredContent, resource links) are theirs.
DIRECT_RESULTS_SINCE = "2025-11-25"


def wire_result(ctx: ServerContext, result: R) -> R:
    """A call's `result`, dumped once (the SDK would dump, check and dump it again) where the
    revision allows; any other answer (`input_required`) as it is."""
    if ctx.protocol_version < DIRECT_RESULTS_SINCE or type(result) is not types.CallToolResult:
        return result
    call = cast(types.CallToolResult, result)
    return cast(R, answer_with(call.model_dump(by_alias=True, mode="json", exclude_none=True), _NO_CONTENT, call))


class _ServedServer(Server[Any]):
    """A server whose `instructions` are those of the upstream servers the caller is served
    (read when a client connects: `initialize`, `server/discover`)."""

    requests: ServedRequests
    tasks: TaskStore

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        """The SDK's, and the tasks this server runs where the connection's era has them."""
        capabilities = super().get_capabilities(*args, **kwargs)
        if not offered(kwargs.get("protocol_version")):
            return capabilities
        return capabilities.model_copy(update={"tasks": TASKS_CAPABILITY})

    @property
    def instructions(self) -> str | None:
        requests: ServedRequests | None = self.__dict__.get("requests")  # None while the SDK constructs it
        return None if requests is None else requests.instructions()

    @instructions.setter
    def instructions(self, value: str | None) -> None:
        pass  # the SDK's constructor sets its own (None): ours come from the requests


class _ListChangingServer(_ServedServer):
    """A server that says it sends `notifications/tools/list_changed` (serve/list_changes.py)."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *args, **kwargs
        )


async def serve_stdio(served: ServedTools) -> None:
    """Serve over this process's stdin/stdout until the client closes stdin."""
    server = build_server(served)
    await server.requests.ready_instructions()
    async with server.tasks.running(), stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


# Connections the kernel queues before the server accepts them: a thousand clients arriving at
# once must wait there, not be refused (128 dropped a burst's tail). The kernel caps it at
# net.core.somaxconn (4096 on current kernels); asyncio lists the socket again with it.
LISTEN_BACKLOG = 4096


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
    sock.listen(LISTEN_BACKLOG)
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
    recycle: Recycle | None = None,
    connections: ConnectionLimits | None = None,
    shutdown: Shutdown | None = None,
    routes: Sequence[Route] = (),
) -> None:
    """Serve streamable HTTP on `sock` (or a new socket bound to host:port); `on_ready(url)` is
    called once the socket listens. With `auth`, every request needs a valid bearer token and
    the server is stateless (any replica can answer any request). `recycle` is told when the
    server is up and may then stop it (see serve/recycle.py). `connections` bounds the
    connections and how long a request head may take (serve/connections.py). `shutdown` counts
    the stop signals and bounds the stop (serve/shutdown.py: `toolroute serve` passes one; by
    default a stop is graceful only); the caller may read it once this returns. `routes`: pages
    served beside MCP (the OAuth connect page and callback of users' own servers)."""
    import uvicorn  # an `mcp` dependency, only needed here

    from toolroute.serve.connections import ConnectionLimits, guarded_protocol, proven

    # A stateless server (with auth) keeps no connection to tell of a change.
    server = build_server(served, list_changes=auth is None)
    await server.requests.ready_instructions()
    app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=rebinding_guard(host),
        stateless_http=auth is not None,
        auth=None if auth is None else auth.settings,
        token_verifier=None if auth is None else auth.verifier,
        custom_starlette_routes=[Route(HEALTH_PATH, _health, methods=["GET"]), *routes],
    )
    sock = sock if sock is not None else bind_socket(host, port)
    limits = (connections or ConnectionLimits()).fitted(descriptor_limit())
    # Embedded, the program owns its process: its stop is graceful only (the CLI's is bounded).
    stopping = shutdown if shutdown is not None else Shutdown(force_after=None)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            stopping.asked()  # the stop's clock starts at the signal, not when the HTTP side is done
            super().handle_exit(sig, frame)

    http = _Server(
        uvicorn.Config(
            proven(app),
            http=guarded_protocol(limits, authenticated=auth is not None),
            log_level="warning",
            backlog=LISTEN_BACKLOG,
            lifespan="on",
            timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS),
            timeout_keep_alive=math.ceil(limits.idle_timeout),
        )
    )
    previous: dict[int, Any] = {}
    serving = False

    def finish() -> None:
        http.should_exit = True

    def stop(*_: object) -> None:
        # Bounded: at its clock's end, or at a second signal, what is left is killed. uvicorn
        # re-raises the signal it handled as it stops serving: that one is not a second.
        if not (serving and stopping.started):
            stopping.asked()
        finish()
        process_ending()  # calls cancelled at the grace's end do not wait for their threads
        if recycle is not None:  # a signal during a recycle ends the process instead
            recycle.withdraw()

    if threading.current_thread() is threading.main_thread():
        # uvicorn handles SIGINT/SIGTERM while it serves, then re-raises the signal; these
        # handlers make that re-raise (and a signal during startup) a graceful stop instead.
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, stop)

    async def announce() -> None:
        # Only once uvicorn has started (and installed its signal handlers) is the server up.
        while not http.started:
            await anyio.sleep(0.01)
        if on_ready is not None:
            on_ready(http_url(sock, path))
        if recycle is not None:
            loop = asyncio.get_running_loop()

            def hand_over() -> None:
                # Stop accepting at once, on the loop: uvicorn looks at `should_exit` only every
                # tenth of a second, and a client it accepted meanwhile would be cut off when it
                # stops; the socket (kept open by the recycle) queues it for the fresh process.
                def close_listeners() -> None:
                    for listener in http.servers:
                        listener.close()
                    finish()

                loop.call_soon_threadsafe(close_listeners)

            recycle.serving(sock, hand_over)

    try:
        async with server.tasks.running(), anyio.create_task_group() as tg:
            tg.start_soon(announce)
            serving = True
            try:
                await http.serve(sockets=[sock])
            finally:
                serving = False
            tg.cancel_scope.cancel()
    finally:
        sock.close()
        if not stopping.started:  # else a second signal, during the close, must still force
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
