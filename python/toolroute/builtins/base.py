"""What a built-in tool is: a request model (schema + validation), a handler, its side effects."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from toolroute.builtins.habits import belongs_to, translate_for_model
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolError
from toolroute.outputcap import cap_error, cap_text
from toolroute.schema import function_definition, model_parameters
from toolroute.types import (
    LocalTool,
    ToolDefinition,
    ToolHost,
    ToolKind,
    ToolOutput,
    ToolTraits,
    fresh,
    using_resources,
    validate_request,
)


class BuiltinRequest(BaseModel):
    """Base of built-in request models: AI4J-style aliases are accepted beside the field names."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_by_alias=True, validate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def accept_other_agents_names(cls, data: Any) -> Any:
        """Names models learned from Claude Code, Codex and Gemini CLI (see `habits`); never in the schema."""
        return translate_for_model(cls, data)


RequestT = TypeVar("RequestT", bound=BaseModel)


@dataclass(frozen=True)
class BuiltinTool(LocalTool, Generic[RequestT]):
    """A built-in: it runs with the call's `BuiltInToolContext` and the router's resources."""

    kind: ClassVar[ToolKind] = ToolKind.BUILTIN
    name: str
    description: str
    request_model: type[RequestT]
    handler: Callable[[RequestT, BuiltInToolContext], ToolOutput]
    read_only: bool

    def __post_init__(self) -> None:
        belongs_to(self.request_model, self.name)  # the other agents' names for this tool apply

    @property
    def traits(self) -> ToolTraits:
        # Never measured into running inline: a grep over a big tree, a command, may take long.
        return ToolTraits(read_only=self.read_only, idempotent=self.read_only, quick=False)

    @cached_property
    def _definition(self) -> ToolDefinition:
        return function_definition(self.name, self.description, model_parameters(self.request_model))

    def definition(self) -> ToolDefinition:
        return fresh(self._definition)

    def bind(self, arguments: Mapping[str, Any], host: ToolHost) -> Callable[[], ToolOutput]:
        """The call, ready to run; what it returns or raises is held to the context's output cap
        (`outputcap`: the one place every built-in's text passes)."""
        ctx = host.builtin_context(self.name)
        limit = ctx.limits.max_output_chars
        try:
            request = validate_request(self.name, self.request_model, arguments)
        except ToolError as exc:
            cap_error(exc, limit)
            raise
        resources = host.resources

        def run() -> ToolOutput:
            try:
                with using_resources(resources):
                    output = self.handler(request, ctx)
            except ToolError as exc:
                cap_error(exc, limit)
                raise
            if len(output.text) <= limit:
                return output
            return ToolOutput(cap_text(output.text, limit), output.trace, output.content)

        return run
