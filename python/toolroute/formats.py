"""Tool definition formats. The router speaks OpenAI Chat Completions; these convert."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolroute.gateway import ToolDefinition


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
    """OpenAI Responses API tools: flattened `{type, name, description, parameters}`."""
    return [{"type": "function", **t["function"]} for t in tools]
