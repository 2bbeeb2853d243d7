"""The seam between the router and a remote MCP gateway (spec sections 4, 5, 9).

The router owns the one registry of exposed names (the Rust `RouteTable`); a gateway changes it
only through `GatewayRoutes`: ask the naming plan for names, then publish or withdraw its own
tools (global ones as GLOBAL_MCP, a user's as `user_{userId}_tool_{key}`). The router decides
precedence and runs whatever a name resolves to through the common `Tool` interface.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from toolroute._core import RouteTable, ToolKind
from toolroute.errors import ToolError
from toolroute.types import Tool, ToolDefinition, ToolOutput

PlanItem = tuple[str, Sequence[str]]  # (identity, candidate names, most readable first)


class GatewayRoutes:
    """What a gateway may do to routing: plan names for its tools, publish and withdraw them.
    Names of host tools (built-ins, local MCP, functions) are never handed out, and a name once
    given to an identity stays with it for the table's life (a user's, until the user is removed)."""

    def __init__(self, table: RouteTable) -> None:
        self._table = table

    def plan(self, items: Iterable[PlanItem]) -> list[str | None]:
        return self._table.plan(ToolKind.GLOBAL_MCP, [(i, list(c)) for i, c in items])

    def publish(self, identity: str, tool: Tool) -> None:
        self._table.insert(ToolKind.GLOBAL_MCP, tool.name, tool, True, identity)

    def withdraw(self, name: str) -> None:
        self._table.remove(name)

    def plan_user(self, user_id: str, items: Iterable[PlanItem]) -> list[str | None]:
        return self._table.plan_user(user_id, [(i, list(c)) for i, c in items])

    def publish_user(self, user_id: str, key: str, tool: Tool) -> str:
        return self._table.insert_user(user_id, key, tool)

    def withdraw_user(self, user_id: str, key: str) -> None:
        self._table.remove_user(user_id, key)

    def resolve(self, name: str, user_id: str | None = None) -> Any | None:
        """What `name` routes to now (for `user_id`, with the router's precedence); None when
        nothing does, or when `name` cannot be one."""
        try:
            found = self._table.resolve(name, user_id)
        except ToolError:
            return None
        return None if found is None else found[1]

    def forget_user(self, user_id: str) -> None:
        """Let a removed user's key names go (none of its tools may be published any more)."""
        if not self._table.forget_user(user_id):
            raise RuntimeError(f"user {user_id!r} still has tools published")


@runtime_checkable
class ToolGateway(Protocol):
    def attach(self, routes: GatewayRoutes) -> None:
        """Called once by the router; the gateway (re)publishes its tools through `routes`."""

    def has_service(self, service_id: str, user_id: str | None = None) -> bool: ...

    def global_tools(self, service_ids: Sequence[str]) -> list[Tool]:
        """The allowlisted global services' tools (loading them); unknown ids raise."""

    def user_tools(self, service_ids: Sequence[str], user_id: str, *, available_only: bool = False) -> list[Tool]:
        """That user's services' tools, named `user_{userId}_tool_{key}`; with `available_only`,
        those of servers that cannot be reached now are left out instead of raising."""

    def user_ids(self) -> list[str]:
        """Users with servers of their own (a user-form name may name one of them)."""

    def prepare(self, user_id: str) -> None:
        """Load `user_id`'s own tool lists not loaded yet; cheap when they all are."""

    async def aprepare(self, user_id: str) -> None: ...

    def refresh(self, user_id: str | None = None, shared: bool = True) -> bool:
        """Load tool lists not loaded yet (connecting lazily): `user_id`'s own, and with `shared`
        the global ones too; True if routing changed."""

    async def arefresh(self, user_id: str | None = None, shared: bool = True) -> bool: ...

    def close(self) -> None: ...


__all__ = ["GatewayRoutes", "PlanItem", "ToolDefinition", "ToolGateway", "ToolOutput"]
