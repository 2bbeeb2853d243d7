"""An MCP `Tool` -> the router's tool definition (OpenAI Chat Completions format).

Everything here comes from an upstream server, so it is treated as hostile: the schema is
inlined within a size and depth budget (`toolroute.schema`), and every string a model will read
(description, property names, enum values, titles) has its control characters made visible.
Projection runs once per listing, off the gateway's loop thread and outside its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from toolroute.errors import ToolRegistrationError
from toolroute.routes import ToolDefinition
from toolroute.schema import JsonSchema, as_parameters, check_size, function_definition
from toolroute.textsafety import neutralize, neutralize_json


@dataclass(frozen=True)
class ProjectedTool:
    """A server's tool made presentable to a model, or the reason it cannot be."""

    description: str
    parameters: JsonSchema | None
    refused: str | None = None  # why the tool is left out; None when `parameters` is set


def input_parameters(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """Self-contained object parameters (refs inlined within the budget, no `$schema`). Servers
    that list `properties` but forget the root `type` are common; MCP requires `object` there."""
    schema = dict(input_schema or {})
    if "type" not in schema and "properties" in schema:
        schema["type"] = "object"
    return as_parameters(schema)


def project(tool: types.Tool) -> ProjectedTool:
    """One tool; a schema that cannot be parameters (or is past the budget) refuses this tool only."""
    description = neutralize(tool.description or tool.title or "")
    try:
        parameters = neutralize_json(input_parameters(tool.input_schema))
    except ToolRegistrationError as exc:
        return ProjectedTool(description, None, str(exc))
    except RecursionError:  # defence in depth: the budget's depth check should stop this first
        return ProjectedTool(description, None, "input schema is nested too deeply")
    return ProjectedTool(description, parameters)


def output_schema(tool: types.Tool) -> JsonSchema | None:
    """The server's `outputSchema` as it sent it (only controls made visible: a client may show it
    to a model), or None when it has none or it is past the schema budget: the tool is kept, only
    its declared result shape is left out."""
    schema = tool.output_schema
    if not schema:
        return None
    try:
        check_size(schema)
    except ToolRegistrationError:
        return None
    visible: JsonSchema = neutralize_json(schema)
    return visible


def declared_annotations(tool: types.Tool) -> dict[str, Any] | None:
    """The tool's declared annotations as the server sent them, with MCP's own (camelCase) keys
    (`title`, `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`, and any
    other it declared), the title's controls made visible; None when it declares none (nothing
    is invented for a server that says nothing)."""
    declared = tool.annotations
    if declared is None:
        return None
    fields: dict[str, Any] = declared.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(fields.get("title"), str):
        fields["title"] = neutralize(fields["title"])
    return fields or None


@dataclass(frozen=True)
class Declared:
    """What an upstream tool declares, as it declared it (strings' controls made visible): its
    whole definition as on the wire (`wire`: inputSchema with its title and `$defs`, outputSchema,
    annotations, title, icons, `_meta`; its name is the server's), and the parts the router reads."""

    output_schema: JsonSchema | None = None
    annotations: Mapping[str, Any] | None = None
    title: str | None = None
    wire: Mapping[str, Any] | None = None


NOTHING_DECLARED = Declared()


def wire_definition(tool: types.Tool) -> dict[str, Any]:
    """`tool` as the server sent it (camelCase, nothing added), every string a model or person
    may read with its controls made visible."""
    wire: dict[str, Any] = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {k: (v if k in _OPAQUE else neutralize_json(v)) for k, v in wire.items()}


_OPAQUE = ("name", "_meta", "icons")  # routed by, or not text for a model: passed as sent


def declared(tool: types.Tool) -> Declared:
    title = neutralize(tool.title) if tool.title else None
    return Declared(output_schema(tool), declared_annotations(tool), title, wire_definition(tool))


def projected_definition(exposed_name: str, projected: ProjectedTool) -> ToolDefinition:
    """Raises `ToolRegistrationError` (with the reason) for a refused tool."""
    if projected.parameters is None:
        raise ToolRegistrationError(projected.refused or "input schema refused")
    return function_definition(exposed_name, projected.description, projected.parameters)


def tool_definition(exposed_name: str, tool: types.Tool) -> ToolDefinition:
    """`project` then `projected_definition`, for one tool at a time."""
    return projected_definition(exposed_name, project(tool))
