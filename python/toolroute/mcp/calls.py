"""The gateway's calls: a published target called on its server's connection, and the direct
calls by name (AI4J's `gateway.callTool` / `callUserTool`), which list what is missing first.
Runs on the gateway's loop."""

from __future__ import annotations

import threading
from typing import Any

from toolroute.asking import Asker
from toolroute.errors import ToolExecutionError, ToolNotFoundError
from toolroute.mcp.loading import ToolLists
from toolroute.mcp.publishing import McpPublisher, McpTarget
from toolroute.mcp.results import to_output
from toolroute.mcp.services import ServiceRegistry
from toolroute.mcp.tracing import in_trace
from toolroute.naming import UserId
from toolroute.progress import ProgressSink
from toolroute.types import ToolOutput


class Calls:
    def __init__(
        self,
        registry: ServiceRegistry,
        publisher: McpPublisher,
        lists: ToolLists,
        lock: threading.RLock,
        *,
        call_timeout: float,
        max_result_chars: int,
    ) -> None:
        self._registry = registry
        self._publisher = publisher
        self._lists = lists
        self._lock = lock
        self.call_timeout = call_timeout
        self.max_result_chars = max_result_chars

    async def call(
        self,
        target: Any,
        arguments: dict[str, Any],
        sink: ProgressSink | None = None,
        asker: Asker | None = None,
        trace: Any = None,
    ) -> ToolOutput:
        if not isinstance(target, McpTarget):
            raise ToolExecutionError(f"not an MCP gateway target: {target!r}")
        with self._lock:
            service = self._registry.get(target.service_key)
        if service is None:
            raise ToolNotFoundError(target.exposed_name, [], f"MCP service {target.service_key!r} is gone")
        timeout = service.config.timeout or self.call_timeout
        with in_trace(trace):  # the SDK's client span is then the caller's child
            result = await service.connection.call_tool(
                target.tool, arguments, timeout, exposed=target.exposed_name, progress=sink, asker=asker
            )
        if service.connection.connects != service.listed_on and not service.stale:
            self._lists.tools_changed(service.connection)  # a restarted server may offer other tools now
        return to_output(
            result,
            service=service.key,
            tool=target.tool,
            exposed_name=target.exposed_name,
            max_chars=self.max_result_chars,
        )

    def target(self, exposed_name: str, user_id: str | None = None) -> McpTarget | None:
        with self._lock:
            return self._publisher.target(exposed_name, user_id)

    def global_tool_names(self) -> list[str]:
        with self._lock:
            return sorted(t.exposed_name for t in self._publisher.live.values() if t.user_id is None)

    async def call_global(self, name: str, arguments: dict[str, Any], asker: Asker | None = None) -> ToolOutput:
        target = self.target(name)
        if target is None and await self._lists.refresh(None):
            target = self.target(name)
        if target is None:
            names = self.global_tool_names()
            suggestions = [n for n in names if name in n or n.endswith(f"_{name}")][:3]
            raise ToolNotFoundError(name, suggestions, "no global MCP tool of that name")
        return await self.call(target, arguments, asker=asker)

    def _user_target(self, user_id: UserId, tool: str) -> McpTarget | None:
        with self._lock:
            return self._publisher.by_key(user_id, tool)

    async def call_user(
        self, user_id: UserId, tool: str, arguments: dict[str, Any], asker: Asker | None = None
    ) -> ToolOutput:
        target = self._user_target(user_id, tool)
        if target is None and await self._lists.refresh(user_id, shared=False):
            target = self._user_target(user_id, tool)
        if target is None:
            with self._lock:
                offering = sorted(t.exposed_name for t in self._publisher.offering(user_id, tool))
            if offering:  # several: the name the model was given says which
                raise ToolNotFoundError(tool, offering, f"several of user {user_id!r}'s MCP servers offer {tool!r}")
            raise ToolNotFoundError(tool, [], f"user {user_id!r} has no MCP tool of that name")
        return await self.call(target, arguments, asker=asker)
