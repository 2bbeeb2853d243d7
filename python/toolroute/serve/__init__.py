"""`toolroute serve`: an allowlist of the router's tools as an MCP server (stdio, streamable HTTP).

The MCP server stack (starlette, uvicorn...) loads only when a server name is first used, so the
CLI's other commands start fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from toolroute.serve.options import RouterOptions, build_router, default_function_list, split_list

# Name -> the module it lives in.
_LAZY = {
    "ServedTools": "toolroute.serve.doors",
    "build_server": "toolroute.serve.server",
    "run": "toolroute.serve.server",
    "serve_http": "toolroute.serve.server",
    "serve_stdio": "toolroute.serve.server",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RouterOptions",
    "ServedTools",
    "build_router",
    "build_server",
    "default_function_list",
    "run",
    "serve_http",
    "serve_stdio",
    "split_list",
]
