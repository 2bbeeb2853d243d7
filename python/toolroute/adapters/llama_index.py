"""LlamaIndex adapter: an allowlist of router tools as LlamaIndex `FunctionTool`s.

    tools = LlamaIndexTools(router, ["read_file", "edit", "bash"], needs_approval=True).to_tool_list()
    agent = FunctionAgent(tools=tools, llm=llm)

Each tool declares the router's JSON schema as it is and answers with a `ToolOutput` whose
`is_error` says whether the call failed (LlamaIndex's `FunctionTool` reports every result as a
success), whose `raw_output` is the structured result where the tool has one and whose text is
what the model reads. A call that needs approval waits inside the workflow
(`ctx.wait_for_event`): the run's event stream carries an `ApprovalRequest` naming the call's
`tool_id`, and the host answers with an `ApprovalResponse` for that same `tool_id` (so each
answer goes to its own call, however many wait at once); the tool runs once approved, never if
rejected, and nothing runs before the answer (the workflow replays the step when it comes).

With `deferred=` (docs/tool_search.md) the deferred tools are left out and `search_tools` is
listed; give the agent `tool_retriever=spec.found_tools()` too, and what a search finds joins
the agent's tools from its next step on (LlamaIndex asks its tool retriever at every step and
for every call). The found tools are kept per `LlamaIndexTools`: give each conversation its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from typing_extensions import Unpack

from toolroute.adapters._content import outcome_parts, with_media
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, Findings, exposed_tools
from toolroute.blocks import Part, Text
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter

require("llama_index.core", "llama-index", package="llama-index-core")

from llama_index.core.base.llms.types import (  # noqa: E402
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
)
from llama_index.core.objects.base import ObjectRetriever  # noqa: E402
from llama_index.core.schema import QueryType  # noqa: E402
from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput  # noqa: E402
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent  # noqa: E402

APPROVAL_TIMEOUT = 3600.0  # seconds a call waits for its answer (LlamaIndex's own default is 2000)


class ApprovalRequest(InputRequiredEvent):
    """Written to the event stream when a call waits for a person: answer with an
    `ApprovalResponse` carrying the same `tool_id`."""

    tool_name: str
    tool_kwargs: dict[str, Any]
    tool_id: str
    prefix: str = ""  # the question, as InputRequiredEvent's examples put it


class ApprovalResponse(HumanResponseEvent):
    """A person's answer to one `ApprovalRequest` (matched by `tool_id`)."""

    tool_id: str
    approved: bool
    reason: str = ""
    response: str = ""


def _schema_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A model whose JSON schema is the router's, as given (LlamaIndex reads tools' parameters
    from `fn_schema.model_json_schema()`; the router validates the arguments itself)."""

    class Parameters(BaseModel):
        model_config = ConfigDict(extra="allow", title=name)

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return dict(schema)

    Parameters.__name__ = Parameters.__qualname__ = f"{name}_parameters"
    return Parameters


def _current_tool_id(name: str, arguments: dict[str, Any]) -> str:
    """The id of the call being run: the agent's `ToolCall` event's `tool_id` (the step's event,
    stable across the replay that delivers the answer); else one made from the call itself."""
    try:
        from workflows.runtime.types.results import StepWorkerStateContextVar

        tool_id = getattr(StepWorkerStateContextVar.get().event, "tool_id", None)
    except (ImportError, LookupError):
        tool_id = None
    if isinstance(tool_id, str) and tool_id:
        return tool_id
    text = json.dumps([name, arguments], sort_keys=True, default=str)
    return "call-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def output(name: str, arguments: dict[str, Any], outcome: CallOutcome) -> ToolOutput:
    """The outcome as a LlamaIndex tool output: the text, `is_error`, the structure as raw output;
    a result with media as its blocks in order (`TextBlock`, `ImageBlock`, `AudioBlock`,
    `DocumentBlock`), which the agent puts in the tool message the model reads."""
    raw = outcome.fields if outcome.fields is not None else outcome.text
    items = outcome_parts(outcome)
    if with_media(items):
        return ToolOutput(
            blocks=[_block(p) for p in items],
            tool_name=name,
            raw_input=arguments,
            raw_output=raw,
            is_error=outcome.is_error,
        )
    return ToolOutput(
        content=outcome.text, tool_name=name, raw_input=arguments, raw_output=raw, is_error=outcome.is_error
    )


def _block(part: Part) -> ContentBlock:
    if isinstance(part, Text):
        return TextBlock(text=part.text)
    data = part.data.encode("ascii")  # LlamaIndex keeps base64 (and takes it as such)
    if part.kind == "image":
        return ImageBlock(image=data, image_mimetype=part.mime_type)
    if part.kind == "audio":
        return AudioBlock(audio=data, format=_audio_format(part.mime_type))
    return DocumentBlock(data=data, document_mimetype=part.mime_type, title=part.filename)


def _audio_format(mime_type: str) -> str:
    """LlamaIndex's audio `format` (a file extension) for a MIME type."""
    subtype = mime_type.split(";", 1)[0].rsplit("/", 1)[-1].lower()
    return {"mpeg": "mp3", "x-wav": "wav", "wave": "wav", "vnd.wave": "wav"}.get(subtype, subtype)


class RouterFunctionTool(FunctionTool):
    """One exposed tool; a call that needs approval waits for its `ApprovalResponse`."""

    def __init__(
        self,
        tools: ExposedTools,
        name: str,
        approval_timeout: float | None = APPROVAL_TIMEOUT,
        findings: Findings | None = None,
    ) -> None:
        fn = tools.definition(name)
        self.tools = tools
        self.exposed_name = name
        self.approval_timeout = approval_timeout
        self.findings = findings  # told what a search call found

        async def run(ctx: Context, **arguments: Any) -> ToolOutput:
            return await self._run(ctx, arguments)

        # The class itself, not the postponed string: LlamaIndex finds the context parameter by it.
        run.__annotations__["ctx"] = Context

        metadata = ToolMetadata(
            name=name, description=fn.get("description") or name, fn_schema=_schema_model(name, fn["parameters"])
        )
        super().__init__(async_fn=run, metadata=metadata)

    async def _run(self, ctx: Context | None, arguments: dict[str, Any]) -> ToolOutput:
        approved = False
        if self.tools.needs_approval(self.exposed_name, arguments):
            if ctx is None:
                return output(self.exposed_name, arguments, await self.tools.aexecute(self.exposed_name, arguments))
            tool_id = _current_tool_id(self.exposed_name, arguments)
            answer = await ctx.wait_for_event(
                ApprovalResponse,
                waiter_event=ApprovalRequest(
                    prefix=f"approve {self.exposed_name}?",
                    tool_name=self.exposed_name,
                    tool_kwargs=arguments,
                    tool_id=tool_id,
                ),
                waiter_id=f"toolroute-approval-{tool_id}",
                requirements={"tool_id": tool_id},
                timeout=self.approval_timeout,
            )
            if not answer.approved:
                why = f": {answer.reason}" if answer.reason else ""
                text = f"the call of {self.exposed_name} was rejected{why}; it did not run"
                return ToolOutput(content=text, tool_name=self.exposed_name, raw_input=arguments, is_error=True)
            approved = True
        outcome = await self.tools.aexecute(self.exposed_name, arguments, approved=approved)
        return self._output(arguments, outcome)

    def _output(self, arguments: dict[str, Any], outcome: CallOutcome) -> ToolOutput:
        if self.findings is not None:
            self.findings.note(self.exposed_name, outcome)
        return output(self.exposed_name, arguments, outcome)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        ctx = kwargs.pop(self.ctx_param_name or "ctx", None)
        return await self._run(ctx, kwargs)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Outside a workflow (no context to wait in): a call that needs approval is held."""
        kwargs.pop(self.ctx_param_name or "ctx", None)
        return self._output(kwargs, self.tools.execute(self.exposed_name, kwargs))


class FoundTools(ObjectRetriever[FunctionTool]):
    """A tool retriever that gives the deferred tools the spec's searches found so far (whatever
    the query: the search tool did the searching)."""

    def __init__(self, spec: LlamaIndexTools) -> None:
        self.spec = spec  # ObjectRetriever's own parts (a node retriever) are not used

    def retrieve(self, str_or_query_bundle: QueryType) -> list[FunctionTool]:
        return self.spec.found()

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[FunctionTool]:
        return self.spec.found()


class LlamaIndexTools:
    """The tools of one allowlist (`ExposedTools`), as LlamaIndex tool specs give them."""

    def __init__(
        self,
        router: ToolRouter | ExposedTools,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        approval_timeout: float | None = APPROVAL_TIMEOUT,
        **options: Unpack[RequestOptions],
    ) -> None:
        self.tools = exposed_tools(router, request, *positional, **options)
        self.approval_timeout = approval_timeout
        self.findings = self.tools.findings()
        self._found: dict[str, FunctionTool] = {}  # tools made for what searches found

    def to_tool_list(self) -> list[FunctionTool]:
        return [self._tool(name) for name in self.tools.names]

    def _tool(self, name: str) -> RouterFunctionTool:
        return RouterFunctionTool(self.tools, name, self.approval_timeout, self.findings)

    def found(self) -> list[FunctionTool]:
        """The deferred tools this spec's searches found so far."""
        names = self.findings.all()
        return [self._found.get(n) or self._found.setdefault(n, self._tool(n)) for n in names]

    def found_tools(self) -> FoundTools:
        """The agent's `tool_retriever`: the deferred tools found so far, at every step."""
        return FoundTools(self)


# The name before adapters were named alike (`XxxTools`, docs/usage.md); kept for a release.
RouterToolSpec = LlamaIndexTools

__all__ = [
    "ApprovalRequest",
    "ApprovalResponse",
    "FoundTools",
    "LlamaIndexTools",
    "RouterFunctionTool",
    "RouterToolSpec",
    "output",
]
