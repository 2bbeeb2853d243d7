"""Code mode in the providers' shapes: `run_code` is an ordinary tool every adapter lists and
answers; where the provider runs the code itself (programmatic tool calling), the adapters mark
who may call each tool with `allowed_callers`, validated against the providers' own SDK types,
and answer calls made by the provider's program like any other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic.types import Message, ToolUnionParam
from openai.types.responses import Response
from openai.types.responses import ToolParam as ResponsesToolParam
from pydantic import TypeAdapter

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.adapters.anthropic import AnthropicTools
from toolroute.adapters.openai import OpenAITools


@pytest.fixture
def router(tmp_path: Path) -> Iterator[ToolRouter]:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as r:
        yield r


def test_openai_responses_tools_carry_allowed_callers(router: ToolRouter) -> None:
    tools = OpenAITools(router, ["read_file", "bash"], native=["shell"], allowed_callers=["direct", "programmatic"])
    shaped = tools.responses_tools()
    for tool in shaped:
        TypeAdapter(ResponsesToolParam).validate_python(tool)
    assert [(t.get("name", t["type"]), t["allowed_callers"]) for t in shaped] == [
        ("read_file", ["direct", "programmatic"]),
        ("shell", ["direct", "programmatic"]),
    ]
    assert "allowed_callers" not in OpenAITools(router, ["read_file"]).responses_tools()[0]


def test_anthropic_tools_carry_allowed_callers(router: ToolRouter, tmp_path: Path) -> None:
    tools = AnthropicTools(router, ["read_file", "bash"], native=["bash"], allowed_callers=["code_execution_20250825"])
    shaped = tools.anthropic_tools()
    for tool in shaped:
        TypeAdapter(ToolUnionParam).validate_python(tool)
    assert {t["name"]: t["allowed_callers"] for t in shaped} == {
        "read_file": ["code_execution_20250825"],
        "bash": ["code_execution_20250825"],
    }


@pytest.mark.parametrize("callers", [[], ["programmatic", "robots"]])
def test_unknown_callers_are_refused_at_once(router: ToolRouter, callers: list[str]) -> None:
    with pytest.raises(ValueError, match="allowed_callers must be some of"):
        OpenAITools(router, ["read_file"], allowed_callers=callers)
    with pytest.raises(ValueError, match="allowed_callers must be some of"):
        AnthropicTools(router, ["read_file"], allowed_callers=callers)


def test_a_call_made_by_the_providers_program_is_answered_like_any_other(router: ToolRouter) -> None:
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_700_000_000,
            "model": "gpt-test",
            "output": [
                {
                    "type": "function_call",
                    "status": "completed",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "read_file",
                    "arguments": '{"path": "a.txt"}',
                    "caller": {"type": "program", "caller_id": "prog_1"},
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    tools = OpenAITools(router, ["read_file"], allowed_callers=["programmatic"])
    [output] = tools.function_call_outputs(response)
    assert output["call_id"] == "call_1" and "1\tone" in output["output"]


def test_run_code_through_the_anthropic_adapter(router: ToolRouter) -> None:
    tools = AnthropicTools(router, ["read_file", "run_code"])
    assert [t["name"] for t in tools.anthropic_tools()] == ["read_file", "run_code"]
    message = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "run_code",
                    "input": {"code": "lines = read_file(path='a.txt').splitlines()\nprint(len(lines))"},
                }
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    [result] = tools.tool_results(message)
    assert result["tool_use_id"] == "tu_1" and not result.get("is_error")
    assert json.loads(str(result["content"]).strip()) == 2
