"""pydantic-ai: the toolset in a scripted run (pydantic-ai's own FunctionModel, no network)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from _framework_script import APPROVED, FINAL, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, REJECTED, TURNS, World, world

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied

from toolroute.adapters.pydantic_ai import RouterToolset

__all__ = ["world"]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    if turn >= len(TURNS):
        return ModelResponse(parts=[TextPart(FINAL)])
    return ModelResponse(parts=[ToolCallPart(c.name, json.dumps(c.arguments), tool_call_id=c.id) for c in TURNS[turn]])


def answers(messages: list[ModelMessage]) -> tuple[dict[str, str], set[str]]:
    """What the model was sent per call id, and the ids it was asked to retry."""
    seen: dict[str, str] = {}
    retried: set[str] = set()
    for message in messages:
        for part in getattr(message, "parts", []):
            if isinstance(part, (ToolReturnPart, RetryPromptPart)) and part.tool_call_id:
                content = part.content if isinstance(part.content, str) else json.dumps(part.content, default=str)
                seen[part.tool_call_id] = content
                if isinstance(part, RetryPromptPart) or getattr(part, "retry", None) is not None:
                    retried.add(part.tool_call_id)
    return seen, retried


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_scripted_run_reaches_every_outcome_as_pydantic_ai_expects(world: World, mode: str) -> None:
    toolset = RouterToolset(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    agent = Agent(FunctionModel(scripted), toolsets=[toolset], output_type=[str, DeferredToolRequests])

    def run(**kwargs: Any) -> Any:
        if mode == "sync":
            return agent.run_sync("go", **kwargs)
        return anyio.run(lambda: agent.run("go", **kwargs))

    first = run()
    assert isinstance(first.output, DeferredToolRequests)
    assert sorted(c.tool_call_id for c in first.output.approvals) == [APPROVED, REJECTED]
    assert world.log.read_text() == ""  # nothing ran before the answers
    decisions = DeferredToolResults(approvals={APPROVED: True, REJECTED: ToolDenied("rejected by the reviewer")})
    second = run(message_history=first.all_messages(), deferred_tool_results=decisions)
    assert second.output == FINAL
    world.seen, retried = answers(second.all_messages())
    assert "rejected by the reviewer" in world.seen[REJECTED]
    # Only bad arguments (and the invented name) ask the model to retry; the failures are results.
    assert retried == {"e1", "e3"}, retried
    world.check()


def test_the_toolset_composes_with_pydantic_ais_wrappers(world: World) -> None:
    """prefixed and filtered (by the side effects in each tool's metadata) apply to it as to any
    toolset: the model sees only read-only tools, under the prefix, and a call reaches the router."""
    toolset = RouterToolset(world.router, FUNCTIONS, MCP_SERVERS)
    composed = toolset.filtered(lambda ctx, tool: tool.metadata["read_only"]).prefixed("tr")
    shown: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not shown:
            shown.extend(t.name for t in info.function_tools)
            return ModelResponse(parts=[ToolCallPart("tr_read_file", {"path": "notes.txt"}, tool_call_id="r1")])
        return ModelResponse(parts=[TextPart(FINAL)])

    result = Agent(FunctionModel(model), toolsets=[composed]).run_sync("go")
    assert result.output == FINAL
    assert "tr_read_file" in shown and "tr_word_stats" in shown
    assert not {"tr_edit", "tr_write_file", "tr_record", "tr_explode"} & set(shown)
    seen, _ = answers(result.all_messages())
    assert "alpha" in seen["r1"]
