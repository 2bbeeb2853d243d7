"""Test doubles for the router core: a built-in and an in-memory gateway speaking the protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from toolroute import BuiltInToolContext, ToolKind, ToolNotFoundError, ToolOutput, ToolTraits
from toolroute.builtins import BuiltinRequest, BuiltinTool
from toolroute.naming import encode_user_tool
from toolroute.routes import GatewayRoutes
from toolroute.schema import function_definition


class EchoRequest(BuiltinRequest):
    path: str = "."


def _echo_handler(request: BaseModel, ctx: BuiltInToolContext) -> ToolOutput:
    return ToolOutput(f"builtin:{request.path}", trace={"level": "builtin"})  # type: ignore[attr-defined]


def builtin_named(name: str) -> BuiltinTool:
    return BuiltinTool(name, "test built-in", EchoRequest, _echo_handler, read_only=True)


@dataclass(frozen=True, eq=False)
class DictTool:
    """A remote tool of `DictGateway`: answers with its own target, joined."""

    target: tuple[str, ...]
    name: str
    gateway: DictGateway

    @property
    def kind(self) -> ToolKind:
        return ToolKind.GLOBAL_MCP if self.target[0] == "global" else ToolKind.USER_MCP

    @property
    def traits(self) -> ToolTraits:
        return ToolTraits()

    def definition(self) -> dict[str, Any]:
        return function_definition(self.name, "remote", {"type": "object", "properties": {}})

    def call(self, arguments: Mapping[str, Any], host: Any) -> ToolOutput:
        self.gateway.calls.append((self.target, dict(arguments)))
        return ToolOutput(":".join(self.target), trace={"target": self.target})

    async def acall(self, arguments: Mapping[str, Any], host: Any) -> ToolOutput:
        return self.call(arguments, host)

    def blocking(self) -> bool:
        return False


class DictGateway:
    """A gateway whose servers are lists of tool names; publishes through `GatewayRoutes`."""

    def __init__(self, services: Mapping[str, Sequence[str]], user_services: Mapping[tuple[str, str], Sequence[str]]):
        self.services = {k: list(v) for k, v in services.items()}
        self.user_services = {k: list(v) for k, v in user_services.items()}
        self.calls: list[tuple[Any, dict[str, Any]]] = []
        self.refreshes = 0
        self.closed = False
        self.tools: dict[tuple[str, ...], DictTool] = {}
        self.listeners: list[Any] = []

    def attach(self, routes: GatewayRoutes) -> None:
        items = [(f"{sid}\0{tool}", [tool, f"{sid}_{tool}"]) for sid, tools in self.services.items() for tool in tools]
        for (ident, _), name in zip(items, routes.plan(items), strict=True):
            sid, tool = ident.split("\0")
            target = DictTool(("global", sid, tool), name or "", self)
            routes.publish(ident, target)
            self.tools[target.target] = target
        for (uid, sid), tools in self.user_services.items():
            user_items = [(f"{sid}\0{tool}", [tool, f"{sid}_{tool}"]) for tool in tools]
            for (ident, _), key in zip(user_items, routes.plan_user(uid, user_items), strict=True):
                tool = ident.split("\0")[1]
                assert key is not None
                target = DictTool(("user", uid, sid, tool), encode_user_tool(uid, key), self)
                routes.publish_user(uid, key, target)
                self.tools[target.target] = target

    def has_service(self, service_id: str, user_id: str | None = None) -> bool:
        if user_id is None:
            return service_id in self.services
        return (user_id, service_id) in self.user_services

    def global_tools(self, service_ids: Sequence[str]) -> list[Any]:
        out = []
        for sid in service_ids:
            if sid not in self.services:
                raise ToolNotFoundError(sid, [], "no such MCP service")
            out += [self.tools[("global", sid, t)] for t in self.services[sid]]
        return out

    def user_tools(self, service_ids: Sequence[str], user_id: str, *, available_only: bool = False) -> list[Any]:
        out = []
        for sid in service_ids:
            if (user_id, sid) not in self.user_services:
                raise ToolNotFoundError(sid, [], f"no such MCP service for user {user_id}")
            out += [self.tools[("user", user_id, sid, t)] for t in self.user_services[(user_id, sid)]]
        return out

    def user_ids(self) -> list[str]:
        return sorted({uid for uid, _ in self.user_services})

    def add_user_server(self, user_id: str, service_id: str, server_config: Mapping[str, Any]) -> None:
        self.user_services[(user_id, service_id)] = list(server_config.get("tools", []))

    def remove_user(self, user_id: str) -> None:
        self.user_services = {k: v for k, v in self.user_services.items() if k[0] != user_id}

    def remove_user_server(self, user_id: str, service_id: str) -> None:
        self.user_services.pop((user_id, service_id), None)

    def on_tools_changed(self, listener: Any) -> None:
        self.listeners.append(listener)

    def prepare(self, user_id: str) -> None:
        pass

    async def aprepare(self, user_id: str) -> None:
        pass

    def refresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        self.refreshes += 1
        return False

    async def arefresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        return self.refresh(user_id, shared)

    def close(self) -> None:
        self.closed = True
