"""LangChain adapter against real `langchain-core` types: a recorded AIMessage, no model call."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from _serve_helpers import make_router
from _serve_tools import MARKER_ENV
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from toolroute.adapters.langchain import LangChainTools


@pytest.fixture
def lc_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, BaseTool]:
    monkeypatch.setenv(MARKER_ENV, str(tmp_path / "ran"))
    with make_router(tmp_path) as router:
        yield {t.name: t for t in LangChainTools(router, ["echo", "add", "fail"], ["notes"]).base_tools()}


def recorded_ai_message() -> AIMessage:
    """What a chat model's `invoke` returns when it asks for tools."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"},
            {"name": "notes_shout", "args": {"text": "yo"}, "id": "call_2", "type": "tool_call"},
            {"name": "fail", "args": {"reason": "broken"}, "id": "call_3", "type": "tool_call"},
            {"name": "add", "args": {"a": "one"}, "id": "call_4", "type": "tool_call"},
        ],
    )


def test_tools_are_base_tools_with_the_router_schema(lc_tools: dict[str, BaseTool]) -> None:
    assert list(lc_tools) == ["echo", "add", "fail", "notes_shout"]
    assert all(isinstance(t, BaseTool) for t in lc_tools.values())
    converted = convert_to_openai_tool(lc_tools["add"])
    assert converted["function"]["name"] == "add"
    assert converted["function"]["description"] == "Add two integers."
    assert converted["function"]["parameters"]["required"] == ["a", "b"]
    assert set(converted["function"]["parameters"]["properties"]) == {"a", "b"}


def test_plain_invoke_returns_the_router_text(lc_tools: dict[str, BaseTool]) -> None:
    assert lc_tools["echo"].invoke({"text": "ab", "times": 2}) == "abab"
    assert anyio.run(lc_tools["echo"].ainvoke, {"text": "c"}) == "c"


def test_tool_calls_of_a_recorded_ai_message_become_tool_messages(lc_tools: dict[str, BaseTool]) -> None:
    replies = [lc_tools[call["name"]].invoke(call) for call in recorded_ai_message().tool_calls]
    assert all(isinstance(r, ToolMessage) for r in replies)
    assert [r.tool_call_id for r in replies] == ["call_1", "call_2", "call_3", "call_4"]
    assert json.loads(replies[0].content) == {"sum": 3}
    assert (replies[1].content, replies[1].status) == ("YO", "success")
    assert replies[2].status == "error" and "RuntimeError: broken" in replies[2].content
    assert replies[3].status == "error" and "invalid arguments for 'add'" in replies[3].content


def test_async_tool_call(lc_tools: dict[str, BaseTool]) -> None:
    call = recorded_ai_message().tool_calls[0]
    reply = anyio.run(lc_tools["add"].ainvoke, call)
    assert isinstance(reply, ToolMessage) and json.loads(reply.content) == {"sum": 3}


def test_the_dispatch_helper_answers_an_invented_name_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    with make_router(tmp_path) as router:
        tools = LangChainTools(router, ["echo", "add"])
        message = AIMessage(
            content="",
            tool_calls=[
                {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1", "type": "tool_call"},
                {"name": "write_file", "args": {"path": "x", "content": "y"}, "id": "c2", "type": "tool_call"},
                {"name": "fail", "args": {"reason": "no"}, "id": "c3", "type": "tool_call"},  # registered, not exposed
            ],
        )
        replies = tools.tool_messages(message)
        again = anyio.run(tools.atool_messages, message.tool_calls)
    for got in (replies, again):
        assert [r.tool_call_id for r in got] == ["c1", "c2", "c3"]
        assert json.loads(got[0].content) == {"sum": 3} and got[0].status == "success"
        assert got[1].status == "error" and "not available" in got[1].content
        assert got[2].status == "error" and "not available" in got[2].content
    assert not (tmp_path / "x").exists() and not marker.exists()
