"""Google ADK adapter: an allowlist of router tools as an ADK toolset.

    toolset = ADKTools(router, ["read_file", "edit", "bash"], needs_approval=True)
    agent = LlmAgent(name="coder", model=..., tools=[toolset])

`ADKTools` is a `BaseToolset` (so `tool_filter` and `tool_name_prefix` apply as to any);
each tool is a `BaseTool` declared with the router's JSON schema. As ADK's own tools do, a tool
never raises into the runner: a result is a dict (the structured result where the tool has one,
the tool's JSON object, else `{"result": text}`), a failure is `{"error": text, "kind": ...}`
(the kind: bad_arguments, not_found, refused, failed...), and a call that needs approval asks
with `tool_context.request_confirmation` and runs once confirmed (a rejected one never runs), as
ADK's MCP tools do.

With `deferred=` (docs/tool_search.md) the deferred tools are left out and `search_tools` is
listed; what a search finds is kept in the session's state (`toolroute_found`) and joins the
toolset's tools from the next model call on, for the rest of the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import Unpack

from toolroute.adapters._content import outcome_parts, with_media
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, exposed_tools
from toolroute.blocks import Text
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter

require("google.adk", "adk", package="google-adk")

from google.adk.agents.readonly_context import ReadonlyContext  # noqa: E402
from google.adk.tools.base_tool import BaseTool  # noqa: E402
from google.adk.tools.base_toolset import BaseToolset, ToolPredicate  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai.types import Blob, FunctionDeclaration, Part  # noqa: E402

FOUND = "toolroute_found"  # session state: the deferred tools this session's searches found
ASK = "Please approve or reject the tool call {name}() by responding with a FunctionResponse with an expected ToolConfirmation payload."  # noqa: E501 - ADK's own wording


class RouterTool(BaseTool):
    """One exposed tool as an ADK tool."""

    def __init__(self, tools: ExposedTools, name: str) -> None:
        fn = tools.definition(name)
        meta = tools.meta(name)
        super().__init__(
            name=name,
            description=fn.get("description", ""),
            custom_metadata={
                "read_only": meta.read_only,
                "idempotent": meta.idempotent,
                "destructive": meta.destructive,
                "needs_approval": meta.needs_approval,
            },
        )
        self.tools = tools
        self.exposed_name = name  # a prefixing toolset renames its copy; the call keeps this one
        self.parameters = fn["parameters"]

    def _get_declaration(self) -> FunctionDeclaration:
        return FunctionDeclaration(name=self.name, description=self.description, parameters_json_schema=self.parameters)

    async def check_require_confirmation(self, args: dict[str, Any], tool_context: ToolContext) -> bool:
        return self.tools.needs_approval(self.exposed_name, args)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        approved = False
        if await self.check_require_confirmation(args, tool_context):
            confirmation = tool_context.tool_confirmation
            if confirmation is None:
                tool_context.request_confirmation(hint=ASK.format(name=self.name))
                # The pause is not a result for the model to summarize (ADK's MCP tools do the same).
                tool_context.actions.skip_summarization = True
                return {"error": "This tool call requires confirmation, please approve or reject."}
            if not confirmation.confirmed:
                return {"error": "This tool call is rejected.", "kind": "refused"}
            approved = True
        outcome = await self.tools.aexecute(self.exposed_name, args, approved=approved)
        found = self.tools.found([(self.exposed_name, outcome.trace)])
        if found:
            held = [str(n) for n in tool_context.state.get(FOUND) or ()]
            tool_context.state[FOUND] = held + [n for n in found if n not in held]
        return result(outcome)


def result(outcome: CallOutcome) -> dict[str, Any]:
    """The outcome as ADK tools answer: a dict, `error` for a failure. A result with media gives
    its text (each media marked at its place) and the media as `Part`s, which ADK moves into the
    function response's own parts, in order."""
    if outcome.is_error:
        return {"error": outcome.text, "kind": outcome.kind.value}
    items = outcome_parts(outcome)
    if with_media(items):
        text: list[str] = []
        media: list[Part] = []
        for part in items:
            if isinstance(part, Text):
                text.append(part.text)
            else:
                media.append(Part(inline_data=Blob(mime_type=part.mime_type, data=part.raw())))
                text.append(f"[{part.label()}: function response part {len(media)}]")
        return {"result": "\n".join(text), "media": media}
    fields = outcome.fields
    return fields if fields is not None else {"result": outcome.text}


class ADKTools(BaseToolset):
    """The tools of one allowlist (`ExposedTools`) as an ADK toolset."""

    def __init__(
        self,
        router: ToolRouter | ExposedTools,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        tool_filter: ToolPredicate | list[str] | None = None,
        tool_name_prefix: str | None = None,
        **options: Unpack[RequestOptions],
    ) -> None:
        super().__init__(tool_filter=tool_filter, tool_name_prefix=tool_name_prefix)
        self.tools = exposed_tools(router, request, *positional, **options)
        self._all = [RouterTool(self.tools, name) for name in self.tools.names]
        self._deferred: dict[str, RouterTool] = {}  # made on first find
        if self.tools.exposure.deferred:
            # A search changes the tools within a turn: ADK's own SkillToolset, which loads
            # tools mid-turn, turns the per-invocation cache of a toolset's tools off alike.
            self._use_invocation_cache = False

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        shown = [*self._all, *self._found(readonly_context)]
        return [tool for tool in shown if self._is_tool_selected(tool, readonly_context)]

    def _found(self, readonly_context: ReadonlyContext | None) -> list[RouterTool]:
        """The deferred tools this session's searches found (kept in its state by the search)."""
        deferred = self.tools.exposure.deferred
        if readonly_context is None or not deferred:
            return []
        names = [n for n in readonly_context.state.get(FOUND) or () if n in deferred]
        return [self._deferred_tool(n) for n in names]

    def _deferred_tool(self, name: str) -> RouterTool:
        tool = self._deferred.get(name)
        if tool is None:
            tool = self._deferred[name] = RouterTool(self.tools, name)
        return tool


# The name before adapters were named alike (`XxxTools`, docs/usage.md); kept for a release.
RouterToolset = ADKTools

__all__ = ["ADKTools", "RouterTool", "RouterToolset", "result"]
