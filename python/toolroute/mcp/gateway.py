"""`McpGateway`: global and per-user MCP servers behind the router (spec 4, 5, 5.1, 9, 13.4).

This half owns connections and their lifecycle: registering servers, connecting (lazily or
eagerly), listing tools, calling them, reconnecting and closing. Which listed tool is exposed
under which name is `publishing.py`'s job, through the router's naming plan.

Global servers are keyed by service id; a user's servers by `user_{userId}_service_{serviceId}`,
each with its own connection (one per user and server: a shared legacy session would share
server-side state between users). All sessions run on one gateway-owned loop thread (`loop.py`).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolroute.errors import ToolError, ToolExecutionError, ToolNotFoundError, ToolRegistrationError
from toolroute.mcp.config import ServerConfig, load_config_file, parse_config, parse_server
from toolroute.mcp.connection import Connection
from toolroute.mcp.loop import LoopThread
from toolroute.mcp.offer import Upstream, UpstreamOffer
from toolroute.mcp.projection import Declared, declared, tool_definition
from toolroute.mcp.publishing import Listed, McpPublisher, McpTarget
from toolroute.mcp.results import DEFAULT_MAX_RESULT_CHARS, to_output
from toolroute.naming import UserId, parse_user_service_key, user_service_key
from toolroute.progress import ProgressSink, current_progress
from toolroute.routes import GatewayRoutes
from toolroute.types import Tool, ToolDefinition, ToolOutput

log = logging.getLogger("toolroute.mcp")

RETRY_FAILED_AFTER = 5.0  # seconds a failed server is skipped by `refresh` (explicit use retries at once)

__all__ = ["McpGateway", "McpTarget", "UpstreamOffer"]


@dataclass
class _Service:
    key: str
    service_id: str
    user_id: UserId | None  # checked where the server was added
    config: ServerConfig
    connection: Connection
    tools: list[types.Tool] | None = None  # None: not listed yet
    definitions: dict[str, ToolDefinition] = field(default_factory=dict)  # nameless, by the server's tool name
    declared: dict[str, Declared] = field(default_factory=dict)  # each tool as its server declared it
    stale: bool = False
    listed_on: int = 0  # the connection's `connects` count when the tools were listed
    error: ToolError | None = None
    failed_at: float = 0.0


def _close_at_exit(ref: weakref.ReferenceType[McpGateway]) -> Callable[[], None]:
    def close() -> None:
        gateway = ref()
        if gateway is not None:
            gateway.close()

    return close


def _failed_recently(service: _Service, now: float) -> bool:
    return service.error is not None and now - service.failed_at < RETRY_FAILED_AFTER


@dataclass
class _Projection:
    """One listing made presentable (outside the gateway lock: a schema may be large)."""

    definitions: dict[str, ToolDefinition] = field(default_factory=dict)  # nameless, by tool name
    skipped: dict[str, str] = field(default_factory=dict)  # why a tool was left out
    declared: dict[str, Declared] = field(default_factory=dict)


def _project(tools: list[types.Tool]) -> _Projection:
    """Nameless definitions of the tools whose schema can be function parameters, why the others
    cannot, and what they declare besides (output schema, annotations, title)."""
    out = _Projection()
    for tool in tools:
        try:
            out.definitions[tool.name] = tool_definition(tool.name, tool)
        except ToolRegistrationError as exc:
            out.skipped[tool.name] = str(exc)
            continue
        out.declared[tool.name] = declared(tool)
    return out


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
    ) -> None:
        if call_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        if max_result_chars <= 0:
            raise ValueError("max_result_chars must be positive")
        self.max_result_chars = max_result_chars
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.eager = eager
        self._lock = threading.RLock()
        self._loop = LoopThread()
        self._closed = False
        self._services: dict[str, _Service] = {}  # by key: global id or user service key
        self._global_ids: list[str] = []
        self._user_ids: dict[str, list[str]] = {}  # user id -> service ids
        self._attached = False
        self._publisher = McpPublisher(self)
        self._skipped: dict[str, str] = {}  # "service/tool" -> why its schema was refused
        self._background: set[asyncio.Task[Any]] = set()
        self._listeners: list[Callable[[UserId | None], None]] = []
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
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> McpGateway:
        """A gateway from an `mcpServers` JSON file (Claude Desktop / Cursor format)."""
        gateway = cls(None, **kwargs)
        try:
            for sid, cfg in load_config_file(path).items():
                gateway._add(sid, None, cfg)
            if gateway.eager and not _loop_running_here():
                gateway.connect()
        except BaseException:
            gateway.close()
            raise
        return gateway

    # ---- registration ------------------------------------------------------------------

    def _add(self, service_id: str, user_id: UserId | None, config: ServerConfig) -> _Service:
        key = user_service_key(user_id, service_id) if user_id is not None else service_id
        with self._lock:
            if self._closed:
                raise ToolExecutionError("the MCP gateway is closed")
            if user_id is None and parse_user_service_key(service_id) is not None:
                raise ToolRegistrationError(
                    f"global MCP service id {service_id!r} has the per-user form user_{{userId}}_service_{{id}}; "
                    "register it with add_user_server instead"
                )
            if key in self._services:
                raise ToolRegistrationError(f"MCP service {key!r} is already registered")
            conn = Connection(
                key,
                config,
                connect_timeout=config.connect_timeout or self.connect_timeout,
                on_tools_changed=self._tools_changed,
            )
            service = _Service(key, service_id, user_id, config, conn)
            self._services[key] = service
            if user_id is None:
                self._global_ids.append(service_id)
            else:
                self._user_ids.setdefault(user_id, []).append(service_id)
        return service

    def add_server(self, service_id: str, server_config: Mapping[str, Any]) -> None:
        """Register a global server (an `mcpServers` entry); connected now only if `eager`."""
        service = self._add(service_id, None, parse_server(service_id, server_config))
        if self.eager:
            self._loop.run(self._load(service))

    def add_user_server(self, user_id: str, service_id: str, server_config: Mapping[str, Any]) -> None:
        """Register a server for one user, under `user_{userId}_service_{serviceId}`."""
        user_id = UserId.of(user_id)
        service = self._add(service_id, user_id, parse_server(service_id, server_config))
        if self.eager:
            self._loop.run(self._load(service))

    def connect(self) -> None:
        """Connect every server now and load its tools (what `eager=True` does at start)."""
        self._loop.run(self._load_all(list(self._services.values()), raise_errors=True))

    async def aconnect(self) -> None:
        await self._loop.arun(self._load_all(list(self._services.values()), raise_errors=True))

    # ---- the ToolGateway protocol -------------------------------------------------------

    def attach(self, routes: GatewayRoutes) -> None:
        """Route through the router's table from now on; tools listed before are named again
        there (where host tool names are known and reserved)."""
        with self._lock:
            if self._attached:
                raise ToolRegistrationError("this MCP gateway is already attached to a router")
            self._attached = True
            self._publisher.attach(routes)
            self._sync_scope(None)
            for uid in self._user_ids:
                self._sync_scope(uid)

    def has_service(self, service_id: str, user_id: str | None = None) -> bool:
        if user_id is None:
            return service_id in self._global_ids
        return service_id in self._user_ids.get(user_id, ()) or service_id in self._global_ids

    def user_ids(self) -> list[str]:
        with self._lock:
            return list(self._user_ids)

    def global_tools(self, service_ids: Sequence[str]) -> list[Tool]:
        """The exposed tools of exactly the named global services; an unknown id raises."""
        services = [self._global_service(sid) for sid in dict.fromkeys(service_ids)]
        self._loop.run(self._load_all(services, raise_errors=True, only_missing=True))
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
            todo = [s for s in services if not _failed_recently(s, now)]
            self._loop.run(self._load_all(todo, raise_errors=False, only_missing=True))
        else:
            self._loop.run(self._load_all(services, raise_errors=True, only_missing=True))
        return self._tools_of(services)

    def get_global_mcp_tools(self, service_ids: Sequence[str]) -> list[ToolDefinition]:
        """Definitions of exactly the named global services' tools; an unknown id raises."""
        return [t.definition() for t in self.global_tools(service_ids)]

    def get_user_mcp_tools(self, service_ids: Sequence[str], user_id: str) -> list[ToolDefinition]:
        return [t.definition() for t in self.user_tools(service_ids, user_id)]

    def _unloaded(self, user_id: str) -> list[_Service]:
        now = time.monotonic()
        with self._lock:
            services = [self._services[user_service_key(user_id, s)] for s in self._user_ids.get(user_id, ())]
            return [s for s in services if (s.tools is None or s.stale) and not _failed_recently(s, now)]

    def prepare(self, user_id: str) -> None:
        """Load `user_id`'s own tool lists not loaded yet (failures are logged, and retried
        after a pause): an explicit user id consults that user's tools before shared ones."""
        todo = self._unloaded(user_id)
        if todo:
            self._loop.run(self._load_all(todo, raise_errors=False))

    async def aprepare(self, user_id: str) -> None:
        todo = self._unloaded(user_id)
        if todo:
            await self._loop.arun(self._load_all(todo, raise_errors=False))

    def refresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        return self._loop.run(self._refresh(user_id, shared))

    async def arefresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        return await self._loop.arun(self._refresh(user_id, shared))

    # The caller's progress sink is read here, before the hop to the gateway loop (a context
    # variable does not cross it): the upstream call asks for progress only if someone did.
    def call(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        return self._loop.run(self._call(target, dict(arguments), current_progress()))

    async def acall(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        return await self._loop.arun(self._call(target, dict(arguments), current_progress()))

    # ---- direct calls (AI4J's gateway.callTool / callUserTool) --------------------------

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        """Call a global tool by its exposed name; never reaches a user's server."""
        return self._loop.run(self._call_global(name, dict(arguments or {})))

    async def acall_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        return await self._loop.arun(self._call_global(name, dict(arguments or {})))

    def call_user_tool(self, user_id: str, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        """Call one of `user_id`'s tools (by tool name or `user_{userId}_tool_{tool}`); never global."""
        return self._loop.run(self._call_user(user_id, tool, dict(arguments or {})))

    async def acall_user_tool(self, user_id: str, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        return await self._loop.arun(self._call_user(user_id, tool, dict(arguments or {})))

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
            return dict(self._skipped)

    def errors(self) -> dict[str, str]:
        """The last connection error of each server that has one."""
        with self._lock:
            return {k: str(s.error) for k, s in self._services.items() if s.error is not None}

    def global_tool_names(self) -> list[str]:
        with self._lock:
            return sorted(t.exposed_name for t in self._publisher.live.values() if t.user_id is None)

    def target(self, exposed_name: str, user_id: str | None = None) -> McpTarget | None:
        with self._lock:
            return self._publisher.target(exposed_name, user_id)

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
            timeout = service.config.timeout or self.call_timeout
            upstreams.append(Upstream(service.service_id, service.connection, timeout))
        return UpstreamOffer(self._loop, upstreams)

    # ---- lookup helpers ----------------------------------------------------------------

    def _global_service(self, service_id: str) -> _Service:
        with self._lock:
            if service_id in self._global_ids:
                return self._services[service_id]
            known = list(self._global_ids)
        raise ToolNotFoundError(
            service_id, [s for s in known if s.lower() == service_id.lower()], "no such global MCP service"
        )

    def _user_or_global_service(self, service_id: str, user_id: UserId) -> _Service:
        parsed = parse_user_service_key(service_id, user_id)
        if parsed is not None:
            service_id = parsed[1]
        elif parse_user_service_key(service_id) is not None:
            raise ToolNotFoundError(service_id, [], f"not an MCP service of user {user_id!r}")
        with self._lock:
            if service_id in self._user_ids.get(user_id, ()):
                return self._services[user_service_key(user_id, service_id)]
            if service_id in self._global_ids:
                return self._services[service_id]
        raise ToolNotFoundError(service_id, [], f"user {user_id!r} has no such MCP service")

    def _tools_of(self, services: list[_Service]) -> list[Tool]:
        out: list[Tool] = []
        with self._lock:
            for service in services:
                out.extend(self._publisher.targets(service.key))
        return out

    # ---- loading (on the gateway loop) -------------------------------------------------

    async def _load_all(self, services: list[_Service], *, raise_errors: bool, only_missing: bool = False) -> bool:
        """List every service of the batch, then name and publish them together, so the names
        a batch gets do not depend on which server answered first."""
        todo = [s for s in services if not (only_missing and s.tools is not None and not s.stale)]
        if not todo:
            return False
        results = await asyncio.gather(*(self._list(s) for s in todo), return_exceptions=True)
        with self._lock:
            scopes = {s.user_id for s, r in zip(todo, results, strict=True) if r is True}
            changed = [self._sync_scope(uid) for uid in sorted(scopes, key=lambda u: (u is not None, u or ""))]
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors and raise_errors:
            raise errors[0]
        for service, result in zip(todo, results, strict=True):
            if isinstance(result, BaseException):  # left out of this listing: say why
                log.warning("MCP server %r is left out: %s", service.key, result)
        return any(changed)

    async def _load(self, service: _Service) -> bool:
        return await self._load_all([service], raise_errors=True)

    async def _list(self, service: _Service) -> bool:
        """List one service's tools and project their schemas (outside the lock); True if listed."""
        try:
            tools = await service.connection.list_tools()
        except ToolError as exc:
            with self._lock:
                service.error, service.failed_at = exc, time.monotonic()
            raise
        # Hostile schemas cost a bounded time, spent on a worker thread: not under the lock, not
        # on the loop that carries every server's calls.
        projected = await asyncio.to_thread(_project, tools)
        with self._lock:
            if self._services.get(service.key) is not service:
                return False  # removed or closed meanwhile
            service.tools, service.stale, service.error = tools, False, None
            service.listed_on = service.connection.connects
            service.definitions = projected.definitions
            service.declared = projected.declared
            for tool in tools:
                self._skipped.pop(f"{service.key}/{tool.name}", None)
            for name, why in projected.skipped.items():
                self._skipped[f"{service.key}/{name}"] = why
                log.warning("MCP server %r: tool %r left out: %s", service.key, name, why)
            return True

    async def _refresh(self, user_id: str | None, shared: bool = True) -> bool:
        """Load the not yet loaded tool lists of one scope: `user_id`'s own servers, and with
        `shared` the global ones (a user-form name can only resolve among a user's own)."""
        now = time.monotonic()
        with self._lock:
            candidates = [self._services[k] for k in self._global_ids] if shared else []
            if user_id is not None:
                candidates += [self._services[user_service_key(user_id, s)] for s in self._user_ids.get(user_id, ())]
            todo = [s for s in candidates if (s.tools is None or s.stale) and not _failed_recently(s, now)]
        return await self._load_all(todo, raise_errors=False)

    def _tools_changed(self, connection: Connection) -> None:
        """`notifications/tools/list_changed`: mark stale and re-list in the background."""
        with self._lock:
            service = self._services.get(connection.key)
            if service is None or self._closed:
                return
            service.stale = True
        task = asyncio.get_running_loop().create_task(self._reload_quietly(service))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reload_quietly(self, service: _Service) -> None:
        try:
            changed = await self._load(service)
        except ToolError as exc:
            log.warning("MCP server %r: re-listing tools after list_changed failed: %s", service.key, exc)
            return
        if changed:
            self._announce(service.user_id)

    def remove_user(self, user_id: str) -> None:
        """Forget `user_id`'s own servers: their connections (and processes) end and their tools
        leave the routing table; `add_user_server` adds them again. For served mode's idle users,
        who then cost nothing until they come back."""
        self._loop.run(self._remove_user(UserId.of(user_id)))

    async def _remove_user(self, user_id: str) -> None:
        with self._lock:
            ids = self._user_ids.pop(user_id, [])
            services = [s for s in (self._services.pop(user_service_key(user_id, i), None) for i in ids) if s]
            for service in services:
                for tool in service.tools or ():
                    self._skipped.pop(f"{service.key}/{tool.name}", None)
            self._publisher.sync(user_id, [])  # withdraws every target of the user and its routes
            self._publisher.routes.forget_user(user_id)  # and the names it held: nothing stays
        # The servers end in the background: the caller (a release under the tenancy's lock)
        # never waits for a process to exit.
        for service in services:
            task = asyncio.get_running_loop().create_task(service.connection.close())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def remove_user_server(self, user_id: str, service_id: str) -> None:
        """Forget one of `user_id`'s own servers (its config changed or it was removed): its
        connection ends in the background and its tools leave the routing table; the user's
        other servers stay as they are. Unknown ids are ignored."""
        self._loop.run(self._remove_user_server(UserId.of(user_id), service_id))

    async def _remove_user_server(self, user_id: str, service_id: str) -> None:
        with self._lock:
            ids = self._user_ids.get(user_id, [])
            if service_id not in ids:
                return
            ids.remove(service_id)
            service = self._services.pop(user_service_key(user_id, service_id))
            for tool in service.tools or ():
                self._skipped.pop(f"{service.key}/{tool.name}", None)
            self._sync_scope(user_id)  # withdraws the server's targets and their routes
        task = asyncio.get_running_loop().create_task(service.connection.close())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def on_tools_changed(self, listener: Callable[[UserId | None], None]) -> None:
        """Call `listener(user_id)` once an upstream server's tools changed (`list_changed`, or a
        restarted server that lists others) and the new names are published: None for a shared
        server, else the user whose server it is. It runs on the gateway's loop: never block."""
        with self._lock:
            self._listeners.append(listener)

    def _announce(self, user_id: UserId | None) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(user_id)
            except Exception:
                log.exception("a tools-changed listener failed")

    def _sync_scope(self, user_id: str | None) -> bool:
        """Publish the tools of every loaded server of one scope (under self._lock)."""
        if user_id is None:
            services = [self._services[s] for s in self._global_ids]
        else:
            services = [self._services[user_service_key(user_id, s)] for s in self._user_ids.get(user_id, ())]
        listings = [
            Listed(
                s.key,
                s.service_id,
                s.user_id,
                s.definitions,
                s.declared,
                s.config.trust_annotations,
            )
            for s in services
            if s.tools is not None
        ]
        return self._publisher.sync(user_id, listings)

    # ---- calls (on the gateway loop) ---------------------------------------------------

    async def _call(self, target: Any, arguments: dict[str, Any], sink: ProgressSink | None = None) -> ToolOutput:
        if not isinstance(target, McpTarget):
            raise ToolExecutionError(f"not an MCP gateway target: {target!r}")
        with self._lock:
            service = self._services.get(target.service_key)
        if service is None:
            raise ToolNotFoundError(target.exposed_name, [], f"MCP service {target.service_key!r} is gone")
        timeout = service.config.timeout or self.call_timeout
        result = await service.connection.call_tool(
            target.tool, arguments, timeout, exposed=target.exposed_name, progress=sink
        )
        if service.connection.connects != service.listed_on and not service.stale:
            self._tools_changed(service.connection)  # a restarted server may offer other tools now
        return to_output(
            result,
            service=service.key,
            tool=target.tool,
            exposed_name=target.exposed_name,
            max_chars=self.max_result_chars,
        )

    async def _call_global(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        target = self.target(name)
        if target is None and await self._refresh(None):
            target = self.target(name)
        if target is None:
            names = self.global_tool_names()
            suggestions = [n for n in names if name in n or n.endswith(f"_{name}")][:3]
            raise ToolNotFoundError(name, suggestions, "no global MCP tool of that name")
        return await self._call(target, arguments)

    def _user_target(self, user_id: str, tool: str) -> McpTarget | None:
        with self._lock:
            return self._publisher.by_key(user_id, tool)

    async def _call_user(self, user_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        user_id = UserId.of(user_id)
        target = self._user_target(user_id, tool)
        if target is None and await self._refresh(user_id, shared=False):
            target = self._user_target(user_id, tool)
        if target is None:
            with self._lock:
                offering = sorted(t.exposed_name for t in self._publisher.offering(user_id, tool))
            if offering:  # several: the name the model was given says which
                raise ToolNotFoundError(tool, offering, f"several of user {user_id!r}'s MCP servers offer {tool!r}")
            raise ToolNotFoundError(tool, [], f"user {user_id!r} has no MCP tool of that name")
        return await self._call(target, arguments)

    # ---- lifecycle ---------------------------------------------------------------------

    def _closing(self) -> bool:
        """Mark closed; False if it already was."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
        atexit.unregister(self._atexit)
        return True

    async def _aclose_sessions(self) -> None:
        for task in list(self._background):
            task.cancel()
        with self._lock:
            connections = [s.connection for s in self._services.values()]
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
            await self._loop.arun(self._load_all(list(self._services.values()), raise_errors=True, only_missing=True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> McpGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
