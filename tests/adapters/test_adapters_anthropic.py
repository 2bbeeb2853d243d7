"""Anthropic adapter against the real `anthropic` types: a recorded Message, no network."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from _serve_helpers import make_router
from _serve_tools import MARKER_ENV
from anthropic.types import Message, MessageParam, ToolParam
from pydantic import TypeAdapter

from toolroute.adapters.anthropic import AnthropicTools


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AnthropicTools:
    monkeypatch.setenv(MARKER_ENV, str(tmp_path / "ran"))
    with make_router(tmp_path) as router:
        yield AnthropicTools(router, ["echo", "add"], ["notes"])


def recorded_message(*tool_uses: tuple[str, str, dict]) -> Message:
    """What `messages.create` returns when Claude asks for tools."""
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "text", "text": "Let me use the tools."},
                *({"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in tool_uses),
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


def test_tool_definitions_are_valid_anthropic_tools(tools: AnthropicTools) -> None:
    definitions = tools.anthropic_tools()
    for d in definitions:
        TypeAdapter(ToolParam).validate_python(d)
    assert [d["name"] for d in definitions] == ["echo", "add", "notes_shout"]
    assert definitions[1]["input_schema"]["required"] == ["a", "b"]
    assert definitions[0]["description"] == "Repeat a text."


def test_tool_use_blocks_become_tool_result_blocks(tools: AnthropicTools, tmp_path: Path) -> None:
    message = recorded_message(
        ("tu_1", "echo", {"text": "ab", "times": 2}),
        ("tu_2", "add", {"a": 1}),
        ("tu_3", "touch_marker", {}),  # in the router, not exposed: must not run
        ("tu_4", "notes_shout", {"text": "hi"}),
    )
    reply = tools.tool_result_message(message)
    TypeAdapter(MessageParam).validate_python(reply)
    assert reply["role"] == "user"
    blocks = reply["content"]
    assert blocks[0] == {"type": "tool_result", "tool_use_id": "tu_1", "content": "abab"}
    assert blocks[1]["is_error"] is True and "b: Field required" in blocks[1]["content"]
    assert blocks[2] == {
        "type": "tool_result",
        "tool_use_id": "tu_3",
        "content": "tool 'touch_marker' is not available here",
        "is_error": True,
    }
    assert blocks[3] == {"type": "tool_result", "tool_use_id": "tu_4", "content": "HI"}
    assert not (tmp_path / "ran").exists()


def test_the_whole_turn_round_trips_as_message_params(tools: AnthropicTools) -> None:
    message = recorded_message(("tu_1", "add", {"a": 2, "b": 3}))
    history = [
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
        tools.tool_result_message(message),
    ]
    for turn in history:
        TypeAdapter(MessageParam).validate_python(turn)
    assert history[2]["content"][0]["content"] == '{"sum":5}'


def test_async_results_match_sync(tools: AnthropicTools) -> None:
    message = recorded_message(("tu_1", "echo", {"text": "q"}), ("tu_2", "bash", {"command": "id"}))
    assert anyio.run(tools.atool_results, message) == tools.tool_results(message)
    assert anyio.run(tools.atool_result_message, message)["content"][1]["is_error"] is True


def test_a_message_without_tool_use_needs_no_results(tools: AnthropicTools) -> None:
    assert tools.tool_results(recorded_message()) == []
