"""An MCP `Tool` -> the router's tool definition (OpenAI Chat Completions format)."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from toolroute.gateway import ToolDefinition
from toolroute.schema import as_parameters, function_definition


def input_parameters(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """Self-contained object parameters (refs inlined, no `$schema`). Servers that list
    `properties` but forget the root `type` are common; MCP requires `object` there anyway."""
    schema = dict(input_schema or {})
    if "type" not in schema and "properties" in schema:
        schema["type"] = "object"
    return as_parameters(schema)


def tool_definition(exposed_name: str, tool: types.Tool) -> ToolDefinition:
    """Raises `ToolRegistrationError` for a schema that cannot be function parameters."""
    description = tool.description or tool.title or ""
    return function_definition(exposed_name, description, input_parameters(tool.input_schema))
