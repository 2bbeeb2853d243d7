"""The seam between the router and a remote MCP gateway (spec sections 4, 5, 9).

The gateway keeps the router's routing table in sync: global tools under kind GLOBAL_MCP, user
tools through `RouteTable.insert_user`, each with an opaque target it alone understands. The
router decides precedence; the gateway only lists and calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from toolroute._core import RouteTable
from toolroute.builtins.base import ToolOutput

ToolDefinition = dict[str, Any]


@runtime_checkable
class ToolGateway(Protocol):
    def attach(self, table: RouteTable) -> None:
        """Called once by the router; the gateway registers its tools into `table`."""

    def has_service(self, service_id: str, user_id: str | None = None) -> bool: ...

    def get_global_mcp_tools(self, service_ids: Sequence[str]) -> list[ToolDefinition]:
        """Definitions of the allowlisted global services' tools; unknown ids raise."""

    def get_user_mcp_tools(self, service_ids: Sequence[str], user_id: str) -> list[ToolDefinition]:
        """Definitions of that user's services, named `user_{userId}_tool_{toolName}`."""

    def refresh(self, user_id: str | None = None) -> bool:
        """Load tool lists not loaded yet (connecting lazily); True if the table changed."""

    async def arefresh(self, user_id: str | None = None) -> bool: ...

    def call(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput:
        """Synchronous call; must not deadlock when invoked from inside a running event loop."""

    async def acall(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput: ...

    def close(self) -> None: ...
