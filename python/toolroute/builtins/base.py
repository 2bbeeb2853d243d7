"""What a built-in tool is: a request model (schema + validation), a handler, its side effects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from toolroute.builtins.habits import translate_for_model
from toolroute.context import BuiltInToolContext


class BuiltinRequest(BaseModel):
    """Base of built-in request models: AI4J-style aliases are accepted beside the field names."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_by_alias=True, validate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def accept_other_agents_names(cls, data: Any) -> Any:
        """Names models learned from Claude Code, Codex and Gemini CLI (see `habits`); never in the schema."""
        return translate_for_model(cls, data)


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result: `text` goes to the model (spec 11); `trace` is the structured side channel."""

    text: str
    trace: Any = None


RequestT = TypeVar("RequestT", bound=BaseModel)


@dataclass(frozen=True)
class BuiltinTool(Generic[RequestT]):
    name: str
    description: str
    request_model: type[RequestT]
    handler: Callable[[RequestT, BuiltInToolContext], ToolOutput]
    read_only: bool
