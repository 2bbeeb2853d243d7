"""Tool definition formats. The router speaks OpenAI Chat Completions; these convert."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from toolroute.routes import ToolDefinition

# Keywords OpenAI's strict mode is documented to accept; a schema using any other is sent with
# strict false (the safe side: strict true with an unsupported keyword is a request error).
_STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
    | {"description", "title", "$ref", "$defs"}
)


def _strict_node(node: Any) -> bool:
    if not isinstance(node, dict) or not node.keys() <= _STRICT_KEYWORDS:
        return False
    props = node.get("properties")
    if node.get("type") == "object" or props is not None:
        if not isinstance(props, dict) or node.get("additionalProperties") is not False:
            return False
        if sorted(node.get("required") or []) != sorted(props):
            return False
        if not all(_strict_node(p) for p in props.values()):
            return False
    if "items" in node and not _strict_node(node["items"]):
        return False
    if "anyOf" in node and not (isinstance(node["anyOf"], list) and all(_strict_node(a) for a in node["anyOf"])):
        return False
    return all(_strict_node(d) for d in (node.get("$defs") or {}).values())


def strict_eligible(parameters: dict[str, Any]) -> bool:
    """True when OpenAI's strict mode can take `parameters` unchanged: every object lists all of
    its properties as required and sets `additionalProperties: false`, and only keywords strict
    mode supports are used. Strict mode would otherwise reject the schema or change its meaning
    (an optional field would become required)."""
    return parameters.get("type") == "object" and _strict_node(parameters)


def to_anthropic(tools: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """Anthropic Messages API tools: `{name, description, input_schema}`."""
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description", ""),
            "input_schema": t["function"]["parameters"],
        }
        for t in tools
    ]


def to_responses(tools: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """OpenAI Responses API tools: flattened `{type, name, description, parameters, strict}`.

    `strict` is always present (the `openai` package's `FunctionToolParam` requires it, and the
    API may pick strict mode when it is left out): a definition's own `strict` is kept, otherwise
    it is true exactly when `strict_eligible(parameters)`.
    """
    out = []
    for t in tools:
        fn = t["function"]
        strict = fn["strict"] if "strict" in fn else strict_eligible(fn.get("parameters") or {})
        out.append({"type": "function", **fn, "strict": strict})
    return out


def namespace_name(service: str) -> str:
    """A service id as an OpenAI namespace name (letters, digits, `_` and `-`, at most 64)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", service)[:64] or "_"
