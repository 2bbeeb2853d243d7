"""`McpGateway`: global and per-user MCP servers behind the router (spec 4, 5, 5.1, 9, 13.4).

This module is the gateway's face: registering servers (global, or a user's own) and forgetting
them, the `ToolGateway` protocol the router calls, introspection, and the lifecycle. The work is
done by one part per concern: `services.py` the one registry of servers, `loading.py` listing
their tools and publishing them (which name each gets is `publishing.py`'s job, through the
router's naming plan), `calls.py` calling them, `offer.py` their prompts, resources and
instructions.

Global servers are keyed by service id; a user's servers by `user_{userId}_service_{serviceId}`,
each with its own connection (one per user and server: a shared legacy session would share
server-side state between users). All sessions run on one gateway-owned loop thread (`loop.py`).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import mcp_types as types

from toolroute.asking import Ask, Asker, Log, Question, current_asker, unsupported
from toolroute.errors import ToolExecutionError, ToolNotFoundError, ToolRegistrationError
from toolroute.mcp.calls import Calls
from toolroute.mcp.config import ServerConfig, load_config_file, parse_config, parse_server
from toolroute.mcp.connection import Connection
from toolroute.mcp.credentials import UpstreamCredentials
from toolroute.mcp.loading import ToolLists
from toolroute.mcp.loop import LoopThread
from toolroute.mcp.offer import Upstream, UpstreamOffer
from toolroute.mcp.publishing import McpPublisher, McpTarget
from toolroute.mcp.results import DEFAULT_MAX_RESULT_CHARS
from toolroute.mcp.services import Service, ServiceRegistry, service_key
from toolroute.mcp.tracing import current_trace
from toolroute.naming import UserId, parse_user_service_key
from toolroute.progress import current_progress
from toolroute.routes import GatewayRoutes
from toolroute.types import Tool, ToolDefinition, ToolOutput

__all__ = ["McpGateway", "McpTarget", "UpstreamOffer"]


def _close_at_exit(ref: weakref.ReferenceType[McpGateway]) -> Callable[[], None]:
    def close() -> None:
        gateway = ref()
        if gateway is not None:
            gateway.close()

    return close


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class McpGateway:
    """MCP servers behind the router: lazy or eager connection, cached tool lists refreshed on
    `notifications/tools/list_changed`, per-call timeouts, reconnect after a crash, clean close."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        call_timeout: float = 60.0,
        connect_timeout: float = 30.0,
        eager: bool = False,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        leave_out_failed: bool = False,
        on_elicitation: Ask | None = None,
        on_sampling: Ask | None = None,
        on_log: Log | None = None,
    ) -> None:
        """With `leave_out_failed`, a server that cannot be reached when `connect` (or `eager`)
        lists every server is left out, logged, and retried in the background until it answers
        (its tools absent until then); without it, `connect` raises its error.

        `on_elicitation` and `on_sampling` answer what a server asks during a call (an
        `ElicitRequest`, a `CreateMessageRequest`; an `ErrorData` refuses), on the loop of an
        async caller (`acall`), else on the gateway's; without them the server is refused.
        `on_log` hears a server's log messages during a call. A served client's own questions
        and messages go to that client instead (docs/mcp.md)."""
        if call_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        if max_result_chars <= 0:
            raise ValueError("max_result_chars must be positive")
        self.connect_timeout = connect_timeout
        self.eager = eager
        self.leave_out_failed = leave_out_failed
        self._on_elicitation = on_elicitation
        self._on_sampling = on_sampling
        self._on_log = on_log
        self._lock = threading.RLock()
        self._loop = LoopThread()
        self._closed = False
        self._services = ServiceRegistry()
        self._attached = False
        self._publisher = McpPublisher(self)
        self._lists = ToolLists(self._services, self._publisher, self._lock)
        self._calls = Calls(
            self._services,
            self._publisher,
            self._lists,
            self._lock,
            call_timeout=call_timeout,
            max_result_chars=max_result_chars,
        )
        # A gateway nobody closed still ends its server processes when the interpreter exits.
        self._atexit = _close_at_exit(weakref.ref(self))
        atexit.register(self._atexit)
        try:
            for sid, cfg in parse_config(config).items():
                self._add(sid, None, cfg)
            if eager and not _loop_running_here():  # inside a loop, `async with` connects instead
                self.connect()
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, only: Collection[str] | None = None, **kwargs: Any
    ) -> McpGateway:
        """A gateway from an `mcpServers` JSON file (Claude Desktop / Cursor format); with `only`,
        of its servers just those ids (the others are never registered, so never started)."""
        gateway = cls(None, **kwargs)
        try:
            for sid, cfg in load_config_file(path).items():
                if only is None or sid in only:
                    gateway._add(sid, None, cfg)
            if gateway.eager and not _loop_running_here():
                gateway.connect()
        except BaseException:
            gateway.close()
            raise
        return gateway

    @property
    def call_timeout(self) -> float:
        return self._calls.call_timeout

    @property
    def max_result_chars(self) -> int:
        return self._calls.max_result_chars

    # ---- registration ------------------------------------------------------------------

    def _add(
        self,
        service_id: str,
        user_id: UserId | None,
        config: ServerConfig,
        credentials: UpstreamCredentials | None = None,
    ) -> Service:
        key = service_key(service_id, user_id)
        with self._lock:
            if self._closed:
                raise ToolExecutionError("the MCP gateway is closed")
            if user_id is None and parse_user_service_key(service_id) is not None:
                raise ToolRegistrationError(
                    f"global MCP service id {service_id!r} has the per-user form user_{{userId}}_service_{{id}}; "
                    "register it with add_user_server instead"
                )
            conn = Connection(
                key,
                config,
                connect_timeout=config.connect_timeout or self.connect_timeout,
                on_tools_changed=self._lists.tools_changed,
                credentials=credentials,
            )
            service = Service(key, service_id, user_id, config, conn)
            self._services.add(service)  # refuses a key already registered (the connection was never opened)
        return service

    def add_server(self, service_id: str, server_config: Mapping[str, Any]) -> None:
        """Register a global server (an `mcpServers` entry); connected now only if `eager`."""
        service = self._add(service_id, None, parse_server(service_id, server_config))
        if self.eager:
            self._loop.run(self._lists.load(service))

    def add_user_server(
        self,
        user_id: str,
        service_id: str,
        server_config: Mapping[str, Any],
        *,
        auth: UpstreamCredentials | None = None,
    ) -> None:
        """Register a server for one user, under `user_{userId}_service_{serviceId}`. With
        `auth` (an HTTP server the user authorizes), every request carries the token it gives;
        until it gives one, the server lists only `authorize` and its calls answer -32042 with
        `auth.authorization_url()` (mcp/credentials.py)."""
        user_id = UserId.of(user_id)
        config = parse_server(service_id, server_config)
        if auth is not None and config.transport != "http":
            raise ToolRegistrationError(f"MCP server {service_id!r}: auth= needs a streamable HTTP server")
        service = self._add(service_id, user_id, config, auth)
        if self.eager:
            self._loop.run(self._lists.load(service))

    def connect(self) -> None:
        """Connect every server now and load its tools (what `eager=True` does at start)."""
        self._loop.run(self._load_everything())

    async def aconnect(self) -> None:
        await self._loop.arun(self._load_everything())

    async def _load_everything(self) -> None:
        if self.leave_out_failed:
            await self._lists.load_leaving_out(self._services.all())
        else:
            await self._lists.load_all(self._services.all(), raise_errors=True)

    def remove_user(self, user_id: str) -> None:
        """Forget `user_id`'s own servers: their connections (and processes) end and their tools
        leave the routing table; `add_user_server` adds them again. For served mode's idle users,
        who then cost nothing until they come back."""
        self._loop.run(self._remove_user(UserId.of(user_id)))

    async def _remove_user(self, user_id: UserId) -> None:
        with self._lock:
            services = self._services.remove_user(user_id)
            for service in services:
                self._lists.forget_skipped(service)
            self._publisher.sync(user_id, [])  # withdraws every target of the user and its routes
            self._publisher.routes.forget_user(user_id)  # and the names it held: nothing stays
        # The servers end in the background: the caller (a release under the tenancy's lock)
        # never waits for a process to exit.
        for service in services:
            self._lists.in_background(service.connection.close())

    def remove_user_server(self, user_id: str, service_id: str) -> None:
        """Forget one of `user_id`'s own servers (its config changed or it was removed): its
        connection ends in the background and its tools leave the routing table; the user's
        other servers stay as they are. Unknown ids are ignored."""
        self._loop.run(self._remove_user_server(UserId.of(user_id), service_id))

    async def _remove_user_server(self, user_id: UserId, service_id: str) -> None:
        with self._lock:
            service = self._services.remove_user_service(user_id, service_id)
            if service is None:
                return
            self._lists.forget_skipped(service)
            self._lists.publish(user_id)  # withdraws the server's targets and their routes
        self._lists.in_background(service.connection.close())

    def on_tools_changed(self, listener: Callable[[UserId | None], None]) -> None:
        """Call `listener(user_id)` once an upstream server's tools changed (`list_changed`, or a
        restarted server that lists others) and the new names are published: None for a shared
        server, else the user whose server it is. It runs on the gateway's loop: never block."""
        self._lists.on_tools_changed(listener)

    # ---- the ToolGateway protocol -------------------------------------------------------

    def attach(self, routes: GatewayRoutes) -> None:
        """Route through the router's table from now on; tools listed before are named again
        there (where host tool names are known and reserved)."""
        with self._lock:
            if self._attached:
                raise ToolRegistrationError("this MCP gateway is already attached to a router")
            self._attached = True
            self._publisher.attach(routes)
            self._lists.publish(None)
            for uid in self._services.users():
                self._lists.publish(uid)

    def has_service(self, service_id: str, user_id: str | None = None) -> bool:
        with self._lock:
            return self._services.has(service_id, UserId.optional(user_id))

    def upstream_status(self) -> dict[str, bool]:
        """Each global server's id and whether its session is up now (served mode's metrics)."""
        with self._lock:
            return {s.service_id: s.connection.connected for s in self._services.global_services()}

    def user_ids(self) -> list[str]:
        with self._lock:
            return list(self._services.users())

    def global_tools(self, service_ids: Sequence[str]) -> list[Tool]:
        """The exposed tools of exactly the named global services; an unknown id raises."""
        services = [self._global_service(sid) for sid in dict.fromkeys(service_ids)]
        self._loop.run(self._lists.load_all(services, raise_errors=True, only_missing=True))
        return self._tools_of(services)

    def user_tools(self, service_ids: Sequence[str], user_id: str, *, available_only: bool = False) -> list[Tool]:
        """That user's services' tools (names `user_{userId}_tool_{key}`); an id the user has no
        server for falls back to the global server of that id, which every user may see. With
        `available_only`, a server that cannot be reached (or failed moments ago, and waits
        for its retry) is left out, logged, instead of failing the whole listing: one dead
        upstream of a served tenant must not take the tenant's other tools with it."""
        uid = UserId.of(user_id)
        services = [self._user_or_global_service(sid, uid) for sid in dict.fromkeys(service_ids)]
        if available_only:
            now = time.monotonic()
            todo = [s for s in services if not s.failed_recently(now)]
            self._loop.run(self._lists.load_all(todo, raise_errors=False, only_missing=True))
        else:
            self._loop.run(self._lists.load_all(services, raise_errors=True, only_missing=True))
        return self._tools_of(services)

    def get_global_mcp_tools(self, service_ids: Sequence[str]) -> list[ToolDefinition]:
        """Definitions of exactly the named global services' tools; an unknown id raises."""
        return [t.definition() for t in self.global_tools(service_ids)]

    def get_user_mcp_tools(self, service_ids: Sequence[str], user_id: str) -> list[ToolDefinition]:
        return [t.definition() for t in self.user_tools(service_ids, user_id)]

    def prepare(self, user_id: str) -> None:
        """Load `user_id`'s own tool lists not loaded yet (failures are logged, and retried
        after a pause): an explicit user id consults that user's tools before shared ones."""
        todo = self._lists.unloaded(UserId.of(user_id))
        if todo:
            self._loop.run(self._lists.load_all(todo, raise_errors=False))

    async def aprepare(self, user_id: str) -> None:
        todo = self._lists.unloaded(UserId.of(user_id))
        if todo:
            await self._loop.arun(self._lists.load_all(todo, raise_errors=False))

    def refresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        return self._loop.run(self._lists.refresh(UserId.optional(user_id), shared))

    async def arefresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        return await self._loop.arun(self._lists.refresh(UserId.optional(user_id), shared))

    # The caller's progress sink is read here, before the hop to the gateway loop (a context
    # variable does not cross it): the upstream call asks for progress only if someone did.
    # So is the caller's asker: whoever answers the server's questions during the call.
    def call(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        # The caller's trace context is taken here too: the loop thread does not have it.
        calling = self._calls.call(target, dict(arguments), current_progress(), self._asker(None), current_trace())
        return self._loop.run(calling)

    async def acall(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        asker = self._asker(asyncio.get_running_loop())
        calling = self._calls.call(target, dict(arguments), current_progress(), asker, current_trace())
        return await self._loop.arun(calling)

    def _asker(self, loop: asyncio.AbstractEventLoop | None) -> Asker | None:
        """The served client of this call if there is one, else the host's callbacks."""
        asker = current_asker()
        if asker is not None or (self._on_elicitation is None and self._on_sampling is None and self._on_log is None):
            return asker
        return Asker(self._ask_host, owner=self, loop=loop, log=self._on_log)

    async def _ask_host(self, question: Question) -> Any:
        if isinstance(question, types.ListRootsRequest):
            return unsupported(question)  # a library host has no roots to give
        answer = self._on_elicitation if isinstance(question, types.ElicitRequest) else self._on_sampling
        return unsupported(question) if answer is None else await answer(question)

    # ---- direct calls (AI4J's gateway.callTool / callUserTool) --------------------------

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        """Call a global tool by its exposed name; never reaches a user's server."""
        return self._loop.run(self._calls.call_global(name, dict(arguments or {}), self._asker(None)))

    async def acall_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        asker = self._asker(asyncio.get_running_loop())
        return await self._loop.arun(self._calls.call_global(name, dict(arguments or {}), asker))

    def call_user_tool(self, user_id: str, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        """Call one of `user_id`'s tools (by tool name or `user_{userId}_tool_{tool}`); never global."""
        return self._loop.run(self._calls.call_user(UserId.of(user_id), tool, dict(arguments or {}), self._asker(None)))

    async def acall_user_tool(self, user_id: str, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        asker = self._asker(asyncio.get_running_loop())
        return await self._loop.arun(self._calls.call_user(UserId.of(user_id), tool, dict(arguments or {}), asker))

    # ---- introspection -----------------------------------------------------------------

    @property
    def collisions(self) -> dict[str, list[str]]:
        """Tool names offered by several global servers: `{name: [service ids]}`. Tools listed
        together all take service-qualified names; a newcomer never takes an incumbent's name."""
        with self._lock:
            return {k: list(v) for k, v in self._publisher.collisions.items()}

    def user_collisions(self, user_id: str) -> dict[str, list[str]]:
        with self._lock:
            return {k: list(v) for k, v in self._publisher.user_collisions.get(user_id, {}).items()}

    @property
    def renamed(self) -> dict[str, str]:
        """`{"service/tool": exposed}` for every global tool not exposed under its own name."""
        with self._lock:
            return dict(self._publisher.renamed)

    @property
    def skipped_tools(self) -> dict[str, str]:
        """Tools left out because their input schema cannot be function parameters."""
        with self._lock:
            return dict(self._lists.skipped)

    def errors(self) -> dict[str, str]:
        """The last connection error of each server that has one."""
        with self._lock:
            return {s.key: str(s.error) for s in self._services.all() if s.error is not None}

    def global_tool_names(self) -> list[str]:
        return self._calls.global_tool_names()

    def target(self, exposed_name: str, user_id: str | None = None) -> McpTarget | None:
        return self._calls.target(exposed_name, user_id)

    # ---- prompts, resources and instructions ---------------------------------------------

    def offer(self, service_ids: Sequence[str], user_id: str | None = None) -> UpstreamOffer:
        """The prompts, resources, resource templates and instructions of exactly the named
        servers (with `user_id`: that user's own server of each id, else the shared one, as for
        tools; never another user's); an unknown id raises `ToolNotFoundError`."""
        return self.offer_of([(sid, user_id) for sid in service_ids])

    def offer_of(self, services: Sequence[tuple[str, str | None]]) -> UpstreamOffer:
        """`offer` for `(service id, user id or None)` pairs, in order (an exposure's upstreams)."""
        upstreams = []
        for sid, uid in dict.fromkeys(services):
            service = self._global_service(sid) if uid is None else self._user_or_global_service(sid, UserId.of(uid))
            if service.left_out:
                continue  # not reachable at start, retried in the background: nothing to offer yet
            timeout = service.config.timeout or self.call_timeout
            upstreams.append(Upstream(service.service_id, service.connection, timeout))
        return UpstreamOffer(self._loop, upstreams)

    # ---- lookup helpers ----------------------------------------------------------------

    def _global_service(self, service_id: str) -> Service:
        with self._lock:
            service = self._services.global_service(service_id)
            known = self._services.global_ids()
        if service is not None:
            return service
        raise ToolNotFoundError(
            service_id, [s for s in known if s.lower() == service_id.lower()], "no such global MCP service"
        )

    def _user_or_global_service(self, service_id: str, user_id: UserId) -> Service:
        parsed = parse_user_service_key(service_id, user_id)
        if parsed is not None:
            service_id = parsed[1]
        elif parse_user_service_key(service_id) is not None:
            raise ToolNotFoundError(service_id, [], f"not an MCP service of user {user_id!r}")
        with self._lock:
            service = self._services.user_service(user_id, service_id) or self._services.global_service(service_id)
        if service is None:
            raise ToolNotFoundError(service_id, [], f"user {user_id!r} has no such MCP service")
        return service

    def _tools_of(self, services: list[Service]) -> list[Tool]:
        out: list[Tool] = []
        with self._lock:
            for service in services:
                out.extend(self._publisher.targets(service.key))
        return out

    # ---- lifecycle ---------------------------------------------------------------------

    def _closing(self) -> bool:
        """Mark closed; False if it already was."""
        with self._lock:
            if self._closed:
                return False
            self._closed = self._lists.closed = True
        atexit.unregister(self._atexit)
        return True

    async def _aclose_sessions(self) -> None:
        for task in list(self._lists.background):
            task.cancel()
        with self._lock:
            connections = [s.connection for s in self._services.all()]
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def close(self) -> None:
        """Close every session and stop every server process; idempotent."""
        if not self._closing():
            return
        try:
            if not self._loop.on_loop_thread():
                self._loop.run(self._aclose_sessions())
        finally:
            self._loop.stop()

    async def aclose(self) -> None:
        if not self._closing():
            return
        try:
            await self._loop.arun(self._aclose_sessions())
        finally:
            self._loop.stop()

    async def __aenter__(self) -> McpGateway:
        if self.eager:
            await self._loop.arun(self._lists.load_all(self._services.all(), raise_errors=True, only_missing=True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> McpGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
