"""The gateway's loading: listing servers' tools (lazily, eagerly, again after
`notifications/tools/list_changed` or a restart), projecting their schemas, and handing each
scope's listings to the publisher; and telling listeners once changed tools are published.
Runs on the gateway's loop; the registry and publisher are read and changed under its lock."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolroute.errors import ToolError, ToolRegistrationError
from toolroute.mcp.connection import Connection
from toolroute.mcp.projection import Declared, declared, tool_definition
from toolroute.mcp.publishing import Listed, McpPublisher
from toolroute.mcp.relist import Relister
from toolroute.mcp.services import Service, ServiceRegistry
from toolroute.naming import UserId
from toolroute.types import ToolDefinition

log = logging.getLogger("toolroute.mcp")
# A server left out at start is tried again after this many seconds, twice as long each time up
# to RETRY_MOST: one that is down costs a spawn (or a connect) a minute at most.
RETRY_FIRST = 2.0
RETRY_MOST = 60.0


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


class SharedListings:
    """Listings alike in every byte, kept once: a gateway where many users register the same
    server (hundreds, in served mode) holds one copy of its tools and their projection, not one
    per user (the parsed listing, the models, the schemas made presentable: tens of KiB each).
    What it hands out is read-only, as every cached definition is (`types.fresh`)."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._kept: OrderedDict[bytes, tuple[list[types.Tool], _Projection]] = OrderedDict()

    def project(self, tools: list[types.Tool]) -> tuple[list[types.Tool], _Projection]:
        """The listing alike to `tools` already kept, with its projection; else `tools`, projected
        now and kept (the least recently used of more than `size` go)."""
        key = b"\0".join(tool.model_dump_json(by_alias=True).encode() for tool in tools)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                return kept
        made = (tools, _project(tools))  # outside the lock: a hostile schema costs time
        with self._lock:
            kept = self._kept.setdefault(key, made)
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
            return kept


LISTINGS = SharedListings()


class ToolLists:
    def __init__(self, registry: ServiceRegistry, publisher: McpPublisher, lock: threading.RLock) -> None:
        self._registry = registry
        self._publisher = publisher
        self._lock = lock
        self.skipped: dict[str, str] = {}  # "service/tool" -> why its schema was refused
        self._listeners: list[Callable[[UserId | None], None]] = []
        self.background: set[asyncio.Task[Any]] = set()
        self.closed = False
        self.relister = Relister(self._reload_quietly, self.in_background)  # one in flight per server

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` on the gateway's loop without waiting for it (kept until it ends)."""
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # ---- listing --------------------------------------------------------------------------

    async def load_all(self, services: list[Service], *, raise_errors: bool, only_missing: bool = False) -> bool:
        """List every service of the batch, then name and publish them together, so the names
        a batch gets do not depend on which server answered first."""
        todo = [s for s in services if not (only_missing and ((s.tools is not None and not s.stale) or s.left_out))]
        if not todo:
            return False
        results = await asyncio.gather(*(self._list(s) for s in todo), return_exceptions=True)
        with self._lock:
            scopes = {s.user_id for s, r in zip(todo, results, strict=True) if r is True}
            changed = [self.publish(uid) for uid in sorted(scopes, key=lambda u: (u is not None, u or ""))]
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors and raise_errors:
            raise errors[0]
        for service, result in zip(todo, results, strict=True):
            if isinstance(result, BaseException):  # left out of this listing: say why
                log.warning("MCP server %r is left out: %s", service.key, result)
        return any(changed)

    async def load(self, service: Service) -> bool:
        return await self.load_all([service], raise_errors=True)

    async def load_leaving_out(self, services: list[Service]) -> None:
        """`load_all`, leaving out each server that fails (logged): it is retried in the
        background until it lists, its tools absent until then, and listeners are told once
        they are published. What waits for a server's tools does not wait for a left-out one."""
        await self.load_all(services, raise_errors=False)
        with self._lock:
            failed = [s for s in services if s.tools is None and self._registry.get(s.key) is s]
            for service in failed:
                service.left_out = True
        for service in failed:
            self.in_background(self._retry(service))

    async def _retry(self, service: Service) -> None:
        delay = RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            with self._lock:
                if self.closed or self._registry.get(service.key) is not service:
                    return
            try:
                changed = await self.load(service)
            except ToolError:
                delay = min(delay * 2, RETRY_MOST)
                continue
            with self._lock:
                service.left_out = False
            log.warning("MCP server %r answered: its tools are served from now on", service.key)
            if changed:
                self._announce(service.user_id)
            return

    async def _list(self, service: Service) -> bool:
        """List one service's tools and project their schemas (outside the lock); True if listed."""
        try:
            tools = await service.connection.list_tools()
        except ToolError as exc:
            with self._lock:
                service.error, service.failed_at = exc, time.monotonic()
            raise
        # Hostile schemas cost a bounded time, spent on a worker thread: not under the lock, not
        # on the loop that carries every server's calls.
        tools, projected = await asyncio.to_thread(LISTINGS.project, tools)
        with self._lock:
            if self._registry.get(service.key) is not service:
                return False  # removed or closed meanwhile
            service.tools, service.stale, service.error = tools, False, None
            service.listed_on = service.connection.connects
            service.definitions = projected.definitions
            service.declared = projected.declared
            self.forget_skipped(service)
            for name, why in projected.skipped.items():
                self.skipped[f"{service.key}/{name}"] = why
                log.warning("MCP server %r: tool %r left out: %s", service.key, name, why)
            return True

    def forget_skipped(self, service: Service) -> None:
        for tool in service.tools or ():
            self.skipped.pop(f"{service.key}/{tool.name}", None)

    def unloaded(self, user_id: UserId) -> list[Service]:
        """`user_id`'s own servers still to list (not waiting out a recent failure)."""
        now = time.monotonic()
        with self._lock:
            return [s for s in self._registry.user_services(user_id) if s.needs_listing(now)]

    async def refresh(self, user_id: UserId | None, shared: bool = True) -> bool:
        """Load the not yet loaded tool lists of one scope: `user_id`'s own servers, and with
        `shared` the global ones (a user-form name can only resolve among a user's own)."""
        now = time.monotonic()
        with self._lock:
            candidates = self._registry.global_services() if shared else []
            if user_id is not None:
                candidates += self._registry.user_services(user_id)
            todo = [s for s in candidates if s.needs_listing(now)]
        return await self.load_all(todo, raise_errors=False)

    # ---- changes --------------------------------------------------------------------------

    def tools_changed(self, connection: Connection) -> None:
        """`notifications/tools/list_changed`: mark stale and re-list in the background."""
        with self._lock:
            service = self._registry.get(connection.key)
            if service is None or self.closed:
                return
            service.stale = True
        self.relister.changed(service.key, service)

    async def _reload_quietly(self, service: Service) -> None:
        try:
            changed = await self.load(service)
        except ToolError as exc:
            log.warning("MCP server %r: re-listing tools after list_changed failed: %s", service.key, exc)
            return
        if changed:
            self._announce(service.user_id)

    def on_tools_changed(self, listener: Callable[[UserId | None], None]) -> None:
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

    # ---- publishing -----------------------------------------------------------------------

    def publish(self, user_id: UserId | None) -> bool:
        """Publish the tools of every listed server of one scope (under the lock); True if
        routing changed."""
        services = self._registry.global_services() if user_id is None else self._registry.user_services(user_id)
        listings = [
            Listed(s.key, s.service_id, s.user_id, s.definitions, s.declared, s.config.trust_annotations)
            for s in services
            if s.tools is not None
        ]
        return self._publisher.sync(user_id, listings)
