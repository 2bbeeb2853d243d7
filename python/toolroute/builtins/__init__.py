"""The built-in coding tools table (spec section 6): fixed schemas, intercepted before all else."""

from __future__ import annotations

import importlib
from functools import cache

from toolroute.builtins.base import BuiltinRequest, BuiltinTool, ToolOutput

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
def builtin_tools() -> dict[str, BuiltinTool]:
    """Name -> tool, imported once on first use."""
    table: dict[str, BuiltinTool] = {}
    for name in BUILTIN_TOOL_NAMES:
        module_name = f"{__name__}.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # not built yet on this branch
        table[name] = module.TOOL
    return table


__all__ = ["BUILTIN_TOOL_NAMES", "BuiltinRequest", "BuiltinTool", "ToolOutput", "builtin_tools"]
