"""LlamaIndex: the tools in a scripted `FunctionAgent` run (LlamaIndex's own
`MockFunctionCallingLLM`, no network), approval answered per call through the event stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from _framework_script import APPROVED, FINAL, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, REJECTED, TURNS, World, world

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM

from toolroute.adapters.llama_index import ApprovalRequest, ApprovalResponse, RouterToolSpec

__all__ = ["world"]


class Script:
    """The scripted model's answers, and the last messages it was sent."""

    def __init__(self) -> None:
        self.last: Sequence[ChatMessage] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.last = list(messages)
        turn = sum(m.role == MessageRole.ASSISTANT for m in messages)
        if turn >= len(TURNS):
            return ChatMessage(role=MessageRole.ASSISTANT, content=FINAL)
        blocks = [ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=c.arguments) for c in TURNS[turn]]
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)

    def answers(self) -> dict[str, str]:
        return {
            str(m.additional_kwargs.get("tool_call_id")): str(m.content)
            for m in self.last
            if m.role == MessageRole.TOOL
        }


def test_a_scripted_run_reaches_every_outcome_as_llama_index_expects(world: World) -> None:
    script = Script()
    spec = RouterToolSpec(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=MockFunctionCallingLLM(response_generator=script))
    asked: list[ApprovalRequest] = []

    async def main() -> Any:
        handler = agent.run(user_msg="go")
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequest):
                assert event.tool_kwargs["tag"] not in world.log.read_text()  # nothing runs before its answer
                asked.append(event)
                answer = ApprovalResponse(tool_id=event.tool_id, approved=event.tool_id == APPROVED, reason="not this")
                handler.ctx.send_event(answer)
        return await handler

    result = anyio.run(main)
    assert FINAL in str(result)
    assert sorted(a.tool_id for a in asked) == [APPROVED, REJECTED]  # each answer to its own call
    world.seen = script.answers()
    assert "rejected: not this" in world.seen[REJECTED]
    world.check()


def test_outputs_say_is_error_and_carry_structure_sync_too(world: World) -> None:
    tools = {t.metadata.name: t for t in RouterToolSpec(world.router, FUNCTIONS, MCP_SERVERS).to_tool_list()}
    stats = tools["word_stats"].call(text="a bb")
    assert not stats.is_error and stats.raw_output == {"words": 2, "longest": "bb"}
    missed = tools["edit"].call(path="notes.txt", old_string="gamma", new_string="x")
    assert missed.is_error and "not found" in missed.content
    assert tools["read_file"].metadata.get_parameters_dict()["required"] == ["path"]  # the router's schema
    held = RouterToolSpec(world.router, FUNCTIONS, needs_approval=NEEDS_APPROVAL).to_tool_list()
    record = next(t for t in held if t.metadata.name == "record")
    outside = record.call(tag="sync")  # no workflow to wait in: held, not run
    assert outside.is_error and "approval" in outside.content and world.log.read_text() == ""
