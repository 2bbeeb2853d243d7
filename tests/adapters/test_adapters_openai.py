"""OpenAI adapter against the real `openai` types: recorded completions and responses, no network."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from _serve_helpers import make_router
from _serve_tools import MARKER_ENV
from openai.types.chat import ChatCompletion, ChatCompletionFunctionTool, ChatCompletionToolMessageParam
from openai.types.responses import FunctionTool, FunctionToolParam, Response, ResponseInputParam
from pydantic import BaseModel, ConfigDict, TypeAdapter

from toolroute import ToolRouter, function_tool
from toolroute.adapters.openai import OpenAITools


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OpenAITools:
    monkeypatch.setenv(MARKER_ENV, str(tmp_path / "ran"))
    with make_router(tmp_path) as router:
        yield OpenAITools(router, ["echo", "add"], ["notes"])


def tool_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def recorded_completion(*calls: dict) -> ChatCompletion:
    """What `chat.completions.create` returns when the model asks for tools."""
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": list(calls)},
                }
            ],
        }
    )


def recorded_response(*calls: dict) -> Response:
    """What `responses.create` returns when the model asks for tools."""
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_700_000_000,
            "model": "gpt-test",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "let me check", "annotations": []}],
                },
                *({"type": "function_call", "status": "completed", **c} for c in calls),
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


def test_chat_tools_are_valid_openai_function_tools(tools: OpenAITools) -> None:
    definitions = tools.chat_tools()
    parsed = [ChatCompletionFunctionTool.model_validate(d) for d in definitions]
    assert [p.function.name for p in parsed] == ["echo", "add", "notes_shout"]
    assert parsed[1].function.parameters is not None
    assert parsed[1].function.parameters["required"] == ["a", "b"]
    assert definitions == tools.router.get_all_tools(["echo", "add"], ["notes"])


def test_responses_tools_are_valid_flat_function_tools(tools: OpenAITools) -> None:
    parsed = [FunctionTool.model_validate(d) for d in tools.responses_tools()]
    assert [(p.type, p.name, p.strict) for p in parsed] == [
        ("function", "echo", False),
        ("function", "add", False),
        ("function", "notes_shout", True),  # its one field is required and nothing else allowed
    ]
    assert parsed[0].description == "Repeat a text."


def test_tool_messages_answer_every_call_in_order(tools: OpenAITools, tmp_path: Path) -> None:
    completion = recorded_completion(
        tool_call("c1", "echo", '{"text": "ab", "times": 2}'),
        tool_call("c2", "add", '{"a": 1, "b": "two"}'),
        tool_call("c3", "touch_marker", "{}"),  # in the router, not exposed: must not run
        tool_call("c4", "notes_shout", '{"text": "hi"}'),
        tool_call("c5", "add", "{not json"),
    )
    messages = tools.tool_messages(completion)
    for m in messages:
        TypeAdapter(ChatCompletionToolMessageParam).validate_python(m)
    assert [m["tool_call_id"] for m in messages] == ["c1", "c2", "c3", "c4", "c5"]
    assert messages[0] == {"role": "tool", "tool_call_id": "c1", "content": "abab"}
    assert messages[1]["content"].startswith("Error: invalid arguments for 'add': b:")
    assert messages[2]["content"] == "Error: tool 'touch_marker' is not available here"
    assert messages[3]["content"] == "HI"
    assert "not valid JSON" in messages[4]["content"]
    assert not (tmp_path / "ran").exists()


def test_tool_messages_accept_the_message_or_the_calls(tools: OpenAITools) -> None:
    completion = recorded_completion(tool_call("c1", "add", '{"a": 2, "b": 3}'))
    message = completion.choices[0].message
    assert tools.tool_messages(message) == tools.tool_messages(message.tool_calls) == tools.tool_messages(completion)
    assert json.loads(tools.tool_messages(message)[0]["content"]) == {"sum": 5}


def test_a_completion_without_tool_calls_needs_no_messages(tools: OpenAITools) -> None:
    assert tools.tool_messages(recorded_completion()) == []


def test_async_tool_messages(tools: OpenAITools) -> None:
    completion = recorded_completion(tool_call("c1", "echo", '{"text": "z"}'), tool_call("c2", "nope", "{}"))
    messages = anyio.run(tools.atool_messages, completion)
    assert [m["content"] for m in messages] == ["z", "Error: tool 'nope' is not available here"]


def test_function_call_outputs_for_the_responses_api(tools: OpenAITools, tmp_path: Path) -> None:
    response = recorded_response(
        {"id": "fc_1", "call_id": "call_1", "name": "echo", "arguments": '{"text": "r"}'},
        {"id": "fc_2", "call_id": "call_2", "name": "touch_marker", "arguments": "{}"},
    )
    outputs = tools.function_call_outputs(response)
    TypeAdapter(ResponseInputParam).validate_python(outputs)
    assert outputs == [
        {"type": "function_call_output", "call_id": "call_1", "output": "r"},
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": "Error: tool 'touch_marker' is not available here",
        },
    ]
    assert anyio.run(tools.afunction_call_outputs, response) == outputs
    assert not (tmp_path / "ran").exists()


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    days: int


def test_responses_tools_carry_strict_as_function_tool_param_requires() -> None:
    @function_tool
    def forecast(request: Closed) -> str:
        """Every field required, nothing else allowed: strict mode takes it as it is."""
        return request.city

    @function_tool
    def search(query: str, limit: int = 10) -> str:
        """An optional field: strict would make it required, so strict is false."""
        return query

    router = ToolRouter(builtins={})
    router.register(forecast)
    router.register(search)
    shaped = OpenAITools(router, functions=["forecast", "search"]).responses_tools()
    checked = [TypeAdapter(FunctionToolParam).validate_python(t) for t in shaped]  # `strict` is Required there
    assert [(t["name"], t["strict"]) for t in checked] == [("forecast", True), ("search", False)]
    assert [FunctionTool.model_validate(t).strict for t in shaped] == [True, False]
