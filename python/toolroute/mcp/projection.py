"""An MCP `Tool` -> the router's tool definition (OpenAI Chat Completions format)."""

from __future__ import annotations

import mcp_types as types

from toolroute.gateway import ToolDefinition
from toolroute.schema import as_parameters, function_definition


def tool_definition(exposed_name: str, tool: types.Tool) -> ToolDefinition:
    """Self-contained parameters (refs inlined, object root, no `$schema`); raises
    `ToolRegistrationError` for a schema that cannot be function parameters."""
    description = tool.description or tool.title or ""
    return function_definition(exposed_name, description, as_parameters(dict(tool.input_schema or {})))
