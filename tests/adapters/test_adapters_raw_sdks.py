"""The OpenAI and Anthropic adapters on the shared scripted run (issue 42): the script plays the
model, turn by turn, as SDK objects; the host asks `pending_approvals`, approves one call and
not the other, and answers the turn with the approved ids; sync and async."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from _framework_script import APPROVED, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, REJECTED, TURNS, World, world
from anthropic.types import Message
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import Response

from toolroute.adapters.anthropic import AnthropicTools
from toolroute.adapters.openai import OpenAITools

__all__ = ["world"]


def _host(pending: list[dict[str, Any]], key: str) -> set[str]:
    """The person's answers: the approved call, never the rejected one."""
    ids = {p[key] for p in pending}
    assert ids <= {APPROVED, REJECTED}
    return ids & {APPROVED}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_openai_responses(world: World, mode: str) -> None:
    tools = OpenAITools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    for turn in TURNS:
        response = Response.model_validate(
            {
                "id": "r",
                "object": "response",
                "created_at": 0,
                "model": "scripted",
                "output": [
                    {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": json.dumps(c.arguments)}
                    for c in turn
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        )
        approved = _host(tools.pending_approvals(response), "call_id")
        if mode == "sync":
            outputs = tools.call_outputs(response, approved=approved)
        else:
            outputs = anyio.run(lambda: tools.acall_outputs(response, approved=approved))  # noqa: B023
        world.seen.update({o["call_id"]: o["output"] for o in outputs})
    assert "approval" in world.seen[REJECTED]
    world.check()


def test_openai_chat_completions(world: World) -> None:
    tools = OpenAITools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    for turn in TURNS:
        message = ChatCompletionMessage.model_validate(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in turn
                ],
            }
        )
        approved = _host(tools.pending_approvals(message), "call_id")
        world.seen.update(
            {m["tool_call_id"]: str(m["content"]) for m in tools.tool_messages(message, approved=approved)}
        )
    world.check()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_anthropic_messages(world: World, mode: str) -> None:
    tools = AnthropicTools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    errors: set[str] = set()
    for turn in TURNS:
        message = Message.model_validate(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "scripted",
                "content": [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in turn],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
        approved = _host(tools.pending_approvals(message), "id")
        if mode == "sync":
            results = tools.tool_results(message, approved=approved)
        else:
            results = anyio.run(lambda: tools.atool_results(message, approved=approved))  # noqa: B023
        for r in results:
            world.seen[r["tool_use_id"]] = str(r["content"])
            if r.get("is_error"):
                errors.add(r["tool_use_id"])
    assert errors == {"e1", "e2", "e3", "e4", "e5", "e6", REJECTED}  # is_error on each failure, never on success
    world.check()
