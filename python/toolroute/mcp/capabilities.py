"""What an upstream server requires of its client that the gateway does not offer (-32021,
missing required client capability): said plainly, for the model and the user, instead of the
SDK's error text. The one the gateway meets in practice is the Tasks extension: a server that runs
a tool only as a task (issue 60; the installed `mcp` SDK implements no tasks, so the gateway
neither declares the extension upstream nor relays it: the tasks it offers its own clients,
serve/tasks.py, call upstreams plainly)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from toolroute.errors import ToolExecutionError
from toolroute.textsafety import neutralize

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def capability_missing(server: str, name: str, tool: str | None, error: types.ErrorData) -> ToolExecutionError:
    data: Any = error.data if isinstance(error.data, dict) else {}
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
        message = (
            f"MCP server {server!r} runs {name!r} only as a task (the MCP Tasks extension), "
            "which this gateway does not pass through"
        )
    else:
        shown = neutralize(json.dumps(required, sort_keys=True)[:500]) if required is not None else "(not said)"
        message = (
            f"MCP server {server!r} requires a client capability for {name!r} that this gateway does not offer: {shown}"
        )
    return ToolExecutionError(message, tool=tool)
