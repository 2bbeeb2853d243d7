"""LangChain and LangGraph adapter: router tools as `BaseTool`s, on `langchain-core` alone, and a
LangGraph tool node that asks for approval once per batch.

(`langchain-mcp-adapters` pins `mcp<2` and cannot be installed beside toolroute.)

    tools = LangChainTools(router, functions=["read_file", "grep"])
    ai_message = ChatOpenAI(...).bind_tools(tools.base_tools()).invoke(messages)
    messages += [ai_message, *tools.tool_messages(ai_message)]  # one ToolMessage per call

Tool errors, and calls of a name the model invented, come back as `ToolMessage(status="error")`
for the model to read, not as exceptions; an invented name runs nothing. Each message's
`artifact` carries what the text cannot: the outcome's kind, the structured result and the trace
(bash's exit code, grep's counts).

In a LangGraph graph, `tool_node()` takes the place of the prebuilt `ToolNode`: when calls of
the last AI message need approval (`needs_approval=`), it interrupts once for the whole batch
(`interrupt({"approval": [...]})`), and on resume (`Command(resume={call_id: True | False |
"reason"})`) runs each call once: approved ones, and the rest of the batch; rejected ones get an
error message and never run. Nothing runs before the answer, so LangGraph's replay of the node
on resume cannot run a call twice.

With `deferred=` (docs/tool_search.md) the deferred tools are left out and `search_tools` is
listed; `base_tools(messages)` adds what the conversation's searches found (read from their
`ToolMessage`s), so binding the tools anew each model call shows them from the next call on:

    model.bind_tools(tools.base_tools(state["messages"])).invoke(state["messages"])
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from toolroute.adapters._content import outcome_parts, with_media
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools
from toolroute.blocks import Part, Text

require("langchain_core", "langchain", package="langchain-core")

from langchain_core.callbacks import (  # noqa: E402  (after the friendly import check)
    AsyncCallbackManagerForToolRun,
    CallbackManagerForToolRun,
)
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.messages.content import (  # noqa: E402
    create_audio_block,
    create_file_block,
    create_image_block,
    create_text_block,
)
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_core.tools import BaseTool, ToolException  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

Content = str | list[str | dict[Any, Any]]  # a message's content, as langchain-core types it
Answers = Mapping[str, bool | str]  # call id -> approved, or refused (False, or the reason)


def artifact(outcome: CallOutcome) -> dict[str, Any]:
    """What a ToolMessage's `artifact` carries besides the text."""
    return {"kind": outcome.kind.value, "structured": outcome.structured, "trace": outcome.trace}


class RouterTool(BaseTool):
    """One router tool; arguments are validated by the router, against the same schema. Its
    result is content and artifact: the text, and the kind, structure and trace."""

    handle_tool_error: bool = True
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    _exposed: ExposedTools = PrivateAttr()

    def __init__(self, exposed: ExposedTools, name: str) -> None:
        fn = exposed.definition(name)
        super().__init__(name=name, description=fn.get("description", ""), args_schema=fn["parameters"])
        self._exposed = exposed

    def _run(self, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any) -> tuple[Content, Any]:
        return _content(self._exposed.execute(self.name, kwargs))

    async def _arun(
        self, run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> tuple[Content, Any]:
        return _content(await self._exposed.aexecute(self.name, kwargs))


def _content(outcome: CallOutcome) -> tuple[Content, Any]:
    if outcome.is_error:
        raise ToolException(outcome.text)  # handle_tool_error: an error ToolMessage, not a raise
    return content(outcome), artifact(outcome)


def content(outcome: CallOutcome) -> Content:
    """A ToolMessage's content: the text, or (a result with media) LangChain's standard content
    blocks in order: text, image, audio and file blocks with the bytes as base64."""
    items = outcome_parts(outcome)
    if not with_media(items):
        return outcome.text
    blocks: list[str | dict[Any, Any]] = [_block(part) for part in items]
    return blocks


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return dict(create_text_block(part.text))
    if part.kind == "image":
        return dict(create_image_block(base64=part.data, mime_type=part.mime_type))
    if part.kind == "audio":
        return dict(create_audio_block(base64=part.data, mime_type=part.mime_type))
    return dict(create_file_block(base64=part.data, mime_type=part.mime_type, filename=part.filename))


class LangChainTools(ExposedTools):
    """An allowlist of router tools as LangChain tools."""

    def base_tools(self, messages: Iterable[Any] = ()) -> list[BaseTool]:
        """The listed tools; with `messages` (the conversation so far), also the deferred tools
        its searches found."""
        results = (
            (m.name, m.artifact.get("trace") if isinstance(m.artifact, dict) else None)
            for m in messages
            if isinstance(m, ToolMessage)
        )
        return [RouterTool(self, name) for name in [*self.names, *self.found(results)]]

    def _message(self, call: Mapping[str, Any], outcome: CallOutcome) -> ToolMessage:
        return ToolMessage(
            content=content(outcome),
            tool_call_id=call.get("id") or "",
            name=call.get("name"),
            status="error" if outcome.is_error else "success",
            artifact=artifact(outcome),
        )

    def tool_messages(self, source: Any, *, approved: Collection[str] = ()) -> list[ToolMessage]:
        """Run every tool call of `source` (an AIMessage, or its `tool_calls`), in order; one
        `ToolMessage` per call. A name outside the allowlist runs nothing and answers an error;
        a call that needs approval runs only if its id is in `approved`."""
        calls = getattr(source, "tool_calls", source)
        return [
            self._message(c, self.execute(str(c.get("name")), c.get("args") or {}, approved=c.get("id") in approved))
            for c in calls
        ]

    async def atool_messages(self, source: Any, *, approved: Collection[str] = ()) -> list[ToolMessage]:
        calls = getattr(source, "tool_calls", source)
        return [
            self._message(
                c, await self.aexecute(str(c.get("name")), c.get("args") or {}, approved=c.get("id") in approved)
            )
            for c in calls
        ]

    # ---- LangGraph ----------------------------------------------------------------------

    def tool_node(self, messages_key: str = "messages") -> RunnableLambda[Any, dict[str, list[ToolMessage]]]:
        """A LangGraph node for the tool calls of the state's last AI message, with approval
        asked once per batch (see the module's docstring); sync and async."""

        def run(state: Any) -> dict[str, list[ToolMessage]]:
            calls, answers = self._batch(state, messages_key)
            approved = {i for i, a in answers.items() if a is True}
            messages = self.tool_messages(self._allowed(calls, answers), approved=approved)
            return {messages_key: self._in_order(calls, answers, messages)}

        async def arun(state: Any) -> dict[str, list[ToolMessage]]:
            calls, answers = self._batch(state, messages_key)
            approved = {i for i, a in answers.items() if a is True}
            messages = await self.atool_messages(self._allowed(calls, answers), approved=approved)
            return {messages_key: self._in_order(calls, answers, messages)}

        return RunnableLambda(run, afunc=arun, name="toolroute_tools")

    def _batch(self, state: Any, key: str) -> tuple[list[Any], dict[str, bool | str]]:
        """The last AI message's calls, and the answers for those that need approval (asked
        once, by interrupting the graph; nothing has run before this point)."""
        from langgraph.types import interrupt

        messages = state[key] if isinstance(state, Mapping) else getattr(state, key)
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        calls: list[Any] = list(last.tool_calls) if last is not None else []
        held = [c for c in calls if self.needs_approval(str(c.get("name")), c.get("args") or {})]
        if not held:
            return calls, {}
        asked = [{"id": c["id"], "name": c["name"], "args": c.get("args") or {}} for c in held]
        answers = interrupt({"approval": asked})
        if not isinstance(answers, Mapping):
            raise TypeError("resume the approval with a mapping of call id to True, False or a reason")
        # A held call nobody answered is refused: only an explicit True runs it.
        return calls, {str(c["id"]): answers.get(c["id"], False) for c in held}

    @staticmethod
    def _allowed(calls: list[Any], answers: Answers) -> list[Any]:
        return [c for c in calls if answers.get(c["id"], True) is True]

    def _in_order(self, calls: list[dict[str, Any]], answers: Answers, ran: list[ToolMessage]) -> list[ToolMessage]:
        """Every call's message, in the calls' order (a refused call's says why it did not run)."""
        by_id = {m.tool_call_id: m for m in ran}
        out = []
        for c in calls:
            answer = answers.get(c["id"], True)
            if answer is True:
                out.append(by_id[c["id"]])
                continue
            why = f": {answer}" if isinstance(answer, str) and answer else ""
            out.append(
                ToolMessage(
                    content=f"the call of {c['name']} was rejected{why}; it did not run",
                    tool_call_id=c["id"],
                    name=c["name"],
                    status="error",
                    artifact={"kind": "refused", "structured": None, "trace": None},
                )
            )
        return out


__all__ = ["LangChainTools", "RouterTool", "artifact", "content"]
