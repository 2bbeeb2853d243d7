"""Test doubles for the router core: a built-in and an in-memory gateway speaking the protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from toolroute import BuiltInToolContext, ToolNotFoundError, ToolOutput
from toolroute._core import RouteTable
from toolroute.builtins import BuiltinRequest, BuiltinTool
from toolroute.naming import encode_user_tool
from toolroute.schema import function_definition


class EchoRequest(BuiltinRequest):
    path: str = "."


def _echo_handler(request: BaseModel, ctx: BuiltInToolContext) -> ToolOutput:
    return ToolOutput(f"builtin:{request.path}", trace={"level": "builtin"})  # type: ignore[attr-defined]


def builtin_named(name: str) -> BuiltinTool:
    return BuiltinTool(name, "test built-in", EchoRequest, _echo_handler, read_only=True)


class DictGateway:
    """A gateway whose servers are dicts of tool name -> result; registers into the table."""

    def __init__(self, services: Mapping[str, Sequence[str]], user_services: Mapping[tuple[str, str], Sequence[str]]):
        self.services = {k: list(v) for k, v in services.items()}
        self.user_services = {k: list(v) for k, v in user_services.items()}
        self.calls: list[tuple[Any, dict[str, Any]]] = []
        self.refreshes = 0
        self.table: RouteTable | None = None

    def attach(self, table: RouteTable) -> None:
        self.table = table
        for sid, tools in self.services.items():
            for tool in tools:
                table.insert(4, tool, ("global", sid, tool))
        for (uid, sid), tools in self.user_services.items():
            for tool in tools:
                table.insert_user(uid, tool, ("user", uid, sid, tool))

    def has_service(self, service_id: str, user_id: str | None = None) -> bool:
        if user_id is None:
            return service_id in self.services
        return (user_id, service_id) in self.user_services

    def _defs(self, names: Sequence[str]) -> list[dict[str, Any]]:
        return [function_definition(n, "remote", {"type": "object", "properties": {}}) for n in names]

    def get_global_mcp_tools(self, service_ids: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for sid in service_ids:
            if sid not in self.services:
                raise ToolNotFoundError(sid, [], "no such MCP service")
            out += self._defs(self.services[sid])
        return out

    def get_user_mcp_tools(self, service_ids: Sequence[str], user_id: str) -> list[dict[str, Any]]:
        out = []
        for sid in service_ids:
            if (user_id, sid) not in self.user_services:
                raise ToolNotFoundError(sid, [], f"no such MCP service for user {user_id}")
            out += self._defs([encode_user_tool(user_id, t) for t in self.user_services[(user_id, sid)]])
        return out

    def refresh(self, user_id: str | None = None) -> bool:
        self.refreshes += 1
        return False

    async def arefresh(self, user_id: str | None = None) -> bool:
        return self.refresh(user_id)

    def call(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        self.calls.append((target, dict(arguments)))
        return ToolOutput(":".join(target), trace={"target": target})

    async def acall(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        return self.call(target, arguments)

    def close(self) -> None:
        self.closed = True
