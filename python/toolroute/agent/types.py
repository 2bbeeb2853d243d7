"""What a model asks for (`AgentToolCall`) and what it gets back (`AgentToolResult`).

The model only ever reads `AgentToolResult.output`; `trace` is the structured side channel
(spec 11.1) for capture, persistence and audit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pydantic_core

# Error kinds the runtime itself produces (the others are toolroute exception class names).
DENIED = "ToolCallDenied"
REJECTED = "ApprovalRejected"
INVALID_CALL = "InvalidToolCall"
REPLAY_MISS = "ReplayMiss"


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data (pydantic models, dataclasses, paths...); unknown objects as repr."""
    return pydantic_core.to_jsonable_python(value, fallback=repr)


@dataclass(frozen=True)
class AgentToolCall:
    """One tool call of a model turn. `arguments` is the raw JSON text (or an already-parsed mapping)."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    call_id: str = ""

    def parsed_arguments(self) -> dict[str, Any] | None:
        """The arguments as a dict, or None when they are not a JSON object."""
        if isinstance(self.arguments, Mapping):
            return dict(self.arguments)
        if not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except (json.JSONDecodeError, TypeError):
            return None
        return value if isinstance(value, dict) else None

    def arguments_text(self) -> str:
        """The arguments as JSON text (a mapping is serialised with sorted keys, stable for matching)."""
        if isinstance(self.arguments, Mapping):
            return json.dumps(jsonable(self.arguments), sort_keys=True, ensure_ascii=False)
        return self.arguments

    def with_call_id(self, call_id: str) -> AgentToolCall:
        return replace(self, call_id=call_id)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "call_id": self.call_id, "arguments": self.arguments_text()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentToolCall:
        return cls(name=data["name"], arguments=data.get("arguments", "{}"), call_id=data.get("call_id", ""))

    @classmethod
    def from_openai(cls, tool_call: Any) -> AgentToolCall:
        """From a Chat Completions `tool_calls` item (an SDK object or its dict form)."""
        data = tool_call if isinstance(tool_call, Mapping) else tool_call.model_dump()
        function = data["function"]
        return cls(name=function["name"], arguments=function.get("arguments") or "{}", call_id=data.get("id", ""))

    @classmethod
    def from_anthropic(cls, block: Any) -> AgentToolCall:
        """From an Anthropic `tool_use` content block (an SDK object or its dict form)."""
        data = block if isinstance(block, Mapping) else block.model_dump()
        return cls(name=data["name"], arguments=dict(data.get("input") or {}), call_id=data.get("id", ""))


@dataclass(frozen=True)
class AgentToolResult:
    """The outcome of one call. A failure is a result too: `is_error` with an explanation in `output`."""

    name: str
    call_id: str
    output: str
    is_error: bool = False
    trace: Any = None
    duration: float = 0.0  # seconds, all attempts included
    error_type: str | None = None  # the exception class name or one of the runtime kinds above
    attempts: int = 1
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def failure(cls, call: AgentToolCall, error_type: str, message: str, **extra: Any) -> AgentToolResult:
        """An error result whose output tells the model what went wrong."""
        return cls(
            name=call.name,
            call_id=call.call_id,
            output=f"Error ({error_type}): {message}",
            is_error=True,
            error_type=error_type,
            **extra,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "call_id": self.call_id,
            "output": self.output,
            "is_error": self.is_error,
            "error_type": self.error_type,
            "trace": jsonable(self.trace),
            "duration": self.duration,
            "attempts": self.attempts,
            "metadata": jsonable(dict(self.metadata)),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentToolResult:
        """The inverse of `to_dict` (a trace comes back as JSON data, not its original type)."""
        return cls(
            name=data["name"],
            call_id=data.get("call_id", ""),
            output=data["output"],
            is_error=bool(data.get("is_error", False)),
            trace=data.get("trace"),
            duration=float(data.get("duration", 0.0)),
            error_type=data.get("error_type"),
            attempts=int(data.get("attempts", 1)),
            metadata=dict(data.get("metadata") or {}),
        )
