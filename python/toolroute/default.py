"""A process-wide default router, for code written in the spec's static `ToolUtil` style."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from toolroute.router import ToolRouter
from toolroute.types import ToolDefinition

_lock = threading.Lock()
_default: ToolRouter | None = None


def default_router() -> ToolRouter:
    """The shared router (created on first use, loading `toolroute.tools` entry points)."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = ToolRouter(entry_points=True)
    return _default


def set_default_router(router: ToolRouter | None) -> ToolRouter | None:
    """Replace the shared router (None resets it); returns the previous one."""
    global _default
    with _lock:
        previous, _default = _default, router
    return previous


def scan(*packages: str) -> None:
    default_router().scan(*packages)


def get_all_function_tools(function_list: Sequence[str] | None) -> list[ToolDefinition]:
    return default_router().get_all_function_tools(function_list)


def get_global_mcp_tools(mcp_server_ids: Sequence[str] | None) -> list[ToolDefinition]:
    return default_router().get_global_mcp_tools(mcp_server_ids)


def get_user_mcp_tools(mcp_server_ids: Sequence[str] | None, user_id: str) -> list[ToolDefinition]:
    return default_router().get_user_mcp_tools(mcp_server_ids, user_id)


def get_all_tools(
    function_list: Sequence[str] | None = None,
    mcp_server_ids: Sequence[str] | None = None,
    user_id: str | None = None,
) -> list[ToolDefinition]:
    return default_router().get_all_tools(function_list, mcp_server_ids, user_id)


def invoke(function_name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None) -> str:
    return default_router().invoke(function_name, argument, user_id)


async def ainvoke(
    function_name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
) -> str:
    return await default_router().ainvoke(function_name, argument, user_id)
