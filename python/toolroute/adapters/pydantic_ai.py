"""pydantic-ai adapter: an allowlist of router tools as a pydantic-ai toolset.

    toolset = PydanticAITools(router, ["read_file", "edit", "bash"], needs_approval=True)
    agent = Agent(model, toolsets=[toolset])

`PydanticAITools` is an `AbstractToolset`, so it composes with pydantic-ai's own wrappers
(`filtered`, `prefixed`, `renamed`, `approval_required`, `defer_loading`). Each outcome reaches
the model the way pydantic-ai tells them apart:

- bad arguments (not JSON, not the schema): `ModelRetry`: the model fixes them, within the tool's
  retries;
- the tool ran and failed (no such file, an `edit` whose text is not there, a path outside the
  workspace, a command's error): `ToolFailed`: a failed result the model adapts to, which does
  not use up retries (so two misses in a row do not end the run);
- a call that needs approval: `ApprovalRequired`: the run ends with `DeferredToolRequests`, and
  the next run's `DeferredToolResults` runs an approved call once and a denied one never;
- ok: a `ToolReturn` whose value is the structured result where the tool has one, else its text,
  with the trace as its metadata.

Tools that are not read-only are marked `sequential` (the agent layer's rule: only read-only
calls run beside others); `metadata` carries each tool's side effects, for `filtered`.

With `deferred=` (docs/tool_search.md) the deferred tools are left out and `search_tools` is
listed; what a search of this conversation found joins the tools from the next step on (read
from the conversation's own search results, so it holds across runs of one message history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_core import SchemaValidator, core_schema
from typing_extensions import Unpack

from toolroute.adapters._content import outcome_parts, with_media
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, OutcomeKind, exposed_tools
from toolroute.blocks import Part, Text
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter

require("pydantic_ai", "pydantic-ai", package="pydantic-ai-slim")

from pydantic_ai import RunContext, Tool, ToolReturn  # noqa: E402
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed  # noqa: E402
from pydantic_ai.messages import BinaryContent, ModelRequest, ToolReturnPart  # noqa: E402
from pydantic_ai.tools import ToolDefinition  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool  # noqa: E402

# toolroute validates the arguments itself (and says what is wrong in its own words), so the
# toolset lets any JSON object through.
ANY_OBJECT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
MAX_RETRIES = 2  # argument retries per tool, as pydantic-ai's default tools get


class PydanticAITools(AbstractToolset[Any]):
    """The tools of one allowlist (`ExposedTools`) as a pydantic-ai toolset."""

    def __init__(
        self,
        router: ToolRouter | ExposedTools,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        max_retries: int = MAX_RETRIES,
        id: str | None = "toolroute",
        **options: Unpack[RequestOptions],
    ) -> None:
        self.tools = exposed_tools(router, request, *positional, **options)
        self.max_retries = max_retries
        self._id = id
        self._listed = {name: self._definition(name) for name in self.tools.names}

    @property
    def id(self) -> str | None:
        return self._id

    def _definition(self, name: str) -> ToolDefinition:
        fn = self.tools.definition(name)
        meta = self.tools.meta(name)
        return ToolDefinition(
            name=name,
            description=fn.get("description"),
            parameters_json_schema=fn["parameters"],
            sequential=not meta.read_only,
            metadata={
                "read_only": meta.read_only,
                "idempotent": meta.idempotent,
                "destructive": meta.destructive,
                "needs_approval": meta.needs_approval,
            },
        )

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        retries = self.max_retries
        shown = dict(self._listed)
        for name in self._found(ctx):
            shown.setdefault(name, self._definition(name))
        return {
            name: ToolsetTool(toolset=self, tool_def=definition, max_retries=retries, args_validator=ANY_OBJECT)
            for name, definition in shown.items()
        }

    def _found(self, ctx: RunContext[Any]) -> list[str]:
        """Deferred tools the conversation's searches found (their results carry the names)."""
        returns = (
            (part.tool_name, part.metadata)
            for message in ctx.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        )
        return self.tools.found(returns)

    def as_tools(self) -> list[Tool[Any]]:
        """The same tools as pydantic-ai `Tool`s, for `Agent(tools=...)`: pydantic-ai then holds
        them in its own function toolset, which costs a run less than a toolset of its own
        (benches/bench_frameworks.py); the outcomes reach the model alike."""
        return [self._tool(name) for name in self._listed]

    def _tool(self, name: str) -> Tool[Any]:
        definition = self._listed[name]

        async def call(ctx: RunContext[Any], **arguments: Any) -> Any:
            return answer(await self.tools.aexecute(name, arguments, approved=ctx.tool_call_approved))

        tool: Tool[Any] = Tool.from_schema(
            call,
            name=name,
            description=definition.description,
            json_schema=definition.parameters_json_schema,
            takes_ctx=True,
            sequential=definition.sequential,
        )
        tool.max_retries = self.max_retries
        tool.metadata = definition.metadata
        return tool

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        outcome = await self.tools.aexecute(name, tool_args, approved=ctx.tool_call_approved)
        return answer(outcome)


def answer(outcome: CallOutcome) -> Any:
    """The outcome as pydantic-ai takes a tool's result: a value, or the exception it expects."""
    if outcome.kind is OutcomeKind.OK:
        items = outcome_parts(outcome)
        if with_media(items):  # sent natively in the tool result where the model takes it
            return ToolReturn(return_value=[_value(p) for p in items], metadata=outcome.trace)
        value = outcome.structured if outcome.structured is not None else outcome.text
        return ToolReturn(return_value=value, metadata=outcome.trace)
    if outcome.kind is OutcomeKind.APPROVAL_NEEDED:
        raise ApprovalRequired(metadata={"reason": outcome.text})
    if outcome.kind is OutcomeKind.BAD_ARGUMENTS:
        raise ModelRetry(outcome.text)
    raise ToolFailed(outcome.text)


def _value(part: Part) -> str | BinaryContent:
    """A part as pydantic-ai holds tool content: text, or `BinaryContent` (`BinaryImage` for an
    image) with the bytes and their media type."""
    if isinstance(part, Text):
        return part.text
    return BinaryContent.narrow_type(BinaryContent(data=part.raw(), media_type=part.mime_type))


# The name before adapters were named alike (`XxxTools`, docs/usage.md); kept for a release.
RouterToolset = PydanticAITools

__all__ = ["PydanticAITools", "RouterToolset", "answer"]
