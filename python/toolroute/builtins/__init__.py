"""The built-in coding tools table (spec section 6): fixed schemas, intercepted before all else."""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.types import ToolOutput

# BuiltInTools.allCodingToolNames(), in the spec's order. Each is a module here exposing `TOOL`.
BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "bash",
    "read_file",
    "write_file",
    "apply_patch",
    "glob",
    "grep",
    "edit",
    "update_agents_md",
)


@cache
def builtin_tools() -> dict[str, BuiltinTool[Any]]:
    """Name -> tool, imported once on first use."""
    return {name: importlib.import_module(f"{__name__}.{name}").TOOL for name in BUILTIN_TOOL_NAMES}


__all__ = ["BUILTIN_TOOL_NAMES", "BuiltinRequest", "BuiltinTool", "ToolOutput", "builtin_tools"]
