"""Deferred tools in the providers' and MCP's shapes: Anthropic (`defer_loading`, toolroute's
search answering with `tool_reference` blocks, or the API's own BM25 / regex search tool),
OpenAI Responses (`defer_loading` beside the hosted `tool_search`, or the plain function), each
validated against the providers' SDK types; and a served MCP server listing the search tool in
place of the deferred tools, which stay callable through it."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
import pytest
from _serve_helpers import TOOLS_MODULE, http_server, tool_env, toolroute_exe
from anthropic.types import Message, ToolUnionParam
from mcp import Client, StdioServerParameters
from openai.types.responses import ToolParam as ResponsesToolParam
from pydantic import TypeAdapter

from toolroute import ToolRouter
from toolroute.adapters.anthropic import AnthropicTools
from toolroute.adapters.openai import OpenAITools
from toolroute.serve import ServedTools, build_server


def claude_calls(name: str, arguments: dict) -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "tool_use", "id": "tu_1", "name": name, "input": arguments}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def test_anthropic_deferred_tools_and_tool_references(router: ToolRouter) -> None:
    tools = AnthropicTools(router, ["echo", "add"], ["notes"], deferred=["notes", "add"])
    shaped = tools.anthropic_tools()
    for tool in shaped:
        TypeAdapter(ToolUnionParam).validate_python(tool)
    assert [(t["name"], t.get("defer_loading", False)) for t in shaped] == [
        ("echo", False),
        ("search_tools", False),
        ("add", True),
        ("notes_shout", True),
    ]
    [result] = tools.tool_results(claude_calls("search_tools", {"query": "shout text in capitals"}))
    assert result["content"][0] == {"type": "tool_reference", "tool_name": "notes_shout"}  # type: ignore[index]
    [missing] = tools.tool_results(claude_calls("search_tools", {"query": "zzzz qqqq"}))
    assert "no tool matched" in str(missing["content"])
    [called] = tools.tool_results(claude_calls("notes_shout", {"text": "hi"}))
    assert called["content"] == "HI"


@pytest.mark.parametrize(("mode", "tool"), [("bm25", "tool_search_tool_bm25"), ("regex", "tool_search_tool_regex")])
def test_anthropic_can_leave_the_search_to_the_api(router: ToolRouter, mode: str, tool: str) -> None:
    shaped = AnthropicTools(router, ["echo", "add"], deferred=["add"], tool_search=mode).anthropic_tools()  # type: ignore[arg-type]
    for t in shaped:
        TypeAdapter(ToolUnionParam).validate_python(t)
    assert [t["name"] for t in shaped] == ["echo", "add", tool]
    assert shaped[-1]["type"] == f"{tool}_20251119"


def test_openai_responses_hosted_tool_search_or_the_plain_function(router: ToolRouter) -> None:
    hosted = OpenAITools(router, ["echo", "add"], ["notes"], deferred=["notes"]).responses_tools()
    for tool in hosted:
        TypeAdapter(ResponsesToolParam).validate_python(tool)
    assert [(t.get("name", t["type"]), t.get("defer_loading", False)) for t in hosted] == [
        ("echo", False),
        ("add", False),
        ("notes_shout", True),
        ("tool_search", False),
    ]
    client = OpenAITools(router, ["echo", "add"], ["notes"], deferred=["notes"], tool_search="client")
    assert [t["name"] for t in client.responses_tools()] == ["echo", "add", "search_tools"]  # type: ignore[typeddict-item]
    assert [t["function"]["name"] for t in client.chat_tools()] == ["echo", "add", "search_tools"]  # type: ignore[typeddict-item]


async def _served(served: ServedTools) -> tuple[list[str], str, str]:
    async with Client(build_server(served)) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        found = await client.call_tool("search_tools", {"query": "upper case text"})
        shout = await client.call_tool("notes_shout", {"text": "x"})
        return listed, found.content[0].text, shout.content[0].text  # type: ignore[union-attr]


def test_served_mcp_lists_the_search_tool_and_serves_what_it_finds(router: ToolRouter) -> None:
    listed, found, shout = anyio.run(_served, ServedTools(router, ["echo"], ["notes"], deferred=["notes"]))
    assert listed == ["echo", "search_tools"]
    assert [t["name"] for t in json.loads(found)["tools"]] == ["notes_shout"]
    assert shout == "X"


async def _search_then_list(target: object, search: bool) -> dict[str, Any]:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed.set()

    async with Client(target, mode="legacy", message_handler=on_message) as client:  # type: ignore[arg-type]
        before = [t.name for t in (await client.list_tools()).tools]
        if search:
            found = await client.call_tool("search_tools", {"query": "upper case text"})
            assert not found.is_error
            with anyio.fail_after(15):
                await changed.wait()
        after = [t.name for t in (await client.list_tools()).tools]
        shout = await client.call_tool("notes_shout", {"text": "x"})
        return {"before": before, "after": after, "shout": shout.content[0].text}  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_served_connection_lists_what_its_searches_found_and_only_it(transport: str) -> None:
    args = ["--modules", TOOLS_MODULE, "--functions", "echo", "--mcp-servers", "notes", "--defer", "notes"]
    if transport == "stdio":
        target = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())
        searched = anyio.run(_search_then_list, target, True)
    else:
        with http_server(args) as url:
            searched = anyio.run(_search_then_list, url, True)
            other = anyio.run(_search_then_list, url, False)
        assert other["after"] == ["echo", "search_tools"]  # another client's listing did not grow
    assert searched["before"] == ["echo", "search_tools"]
    assert searched["after"] == ["echo", "search_tools", "notes_shout"]
    assert searched["shout"] == "X"


def test_a_pydantic_ai_run_gains_what_its_search_found(router: ToolRouter) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolroute.adapters.pydantic_ai import RouterToolset

    shown: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown.append(sorted(t.name for t in info.function_tools))
        step = len(shown)
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("search_tools", {"query": "upper case text"}, tool_call_id="s1")])
        if step == 2:
            return ModelResponse(parts=[ToolCallPart("notes_shout", {"text": "hi"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    toolset = RouterToolset(router, ["echo"], ["notes"], deferred=["notes"])
    result = Agent(FunctionModel(model), toolsets=[toolset]).run_sync("go")
    assert result.output == "done"
    assert shown[0] == ["echo", "search_tools"]  # deferred: not shown before a search
    assert shown[1] == ["echo", "notes_shout", "search_tools"]  # found: shown from the next step
    returns = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert [(p.tool_name, p.content) for p in returns][-1] == ("notes_shout", "HI")


def test_openai_client_executed_tool_search_items(router: ToolRouter) -> None:
    """`tool_search="items"`: the API's tool_search type run by the client, in a scripted session:
    the model searches, the answer loads the definitions found, the model calls one."""
    from openai.types.responses import Response, ResponseInputItemParam

    tools = OpenAITools(router, ["echo"], ["notes"], deferred=["notes"], tool_search="items")
    shaped = tools.responses_tools()
    for tool in shaped:
        TypeAdapter(ResponsesToolParam).validate_python(tool)
    assert [t.get("name", t["type"]) for t in shaped] == ["echo", "tool_search"]
    assert shaped[-1]["execution"] == "client"  # type: ignore[typeddict-item]
    assert "query" in shaped[-1]["parameters"]["properties"]  # type: ignore[typeddict-item]

    def response(*output: dict[str, Any]) -> Response:
        return Response.model_validate(
            {
                "id": "resp_1",
                "object": "response",
                "created_at": 0,
                "model": "gpt-5.4",
                "output": list(output),
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        )

    search = {
        "type": "tool_search_call",
        "id": "ts_1",
        "call_id": "call_ts",
        "execution": "client",
        "status": "completed",
        "arguments": {"query": "shout text in capital letters"},
    }
    [loaded] = tools.call_outputs(response(search))
    TypeAdapter(ResponseInputItemParam).validate_python(loaded)
    assert loaded["type"] == "tool_search_output" and loaded["call_id"] == "call_ts"
    assert [t["name"] for t in loaded["tools"]] == ["notes_shout"]
    assert loaded["tools"][0]["parameters"]["properties"]["text"]
    # A server-executed search is the API's own: nothing to answer.
    assert tools.call_outputs(response({**search, "execution": "server"})) == []
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "notes_shout",
        "arguments": '{"text": "hi"}',
    }
    [answer] = tools.call_outputs(response(call))
    assert answer == {"type": "function_call_output", "call_id": "call_1", "output": "HI"}
    # Nothing found: an empty load, not an error the API cannot read.
    [empty] = tools.call_outputs(response({**search, "arguments": {"query": "zzzz qqqq"}}))
    assert empty["tools"] == [] and empty["status"] == "completed"
    # The allowlist stays the ceiling: a tool outside it is never loaded.
    narrow = OpenAITools(router, ["echo"], ["notes"], deferred=True, tool_search="items")
    [only] = narrow.call_outputs(response({**search, "arguments": {"query": "add two numbers"}}))
    assert {t["name"] for t in only["tools"]} <= set(narrow.exposure.tools)


@pytest.mark.parametrize("search", ["server", "items"])
def test_openai_namespaces_group_each_servers_tools(router: ToolRouter, search: str) -> None:
    from openai.types.responses import Response

    tools = OpenAITools(router, ["echo"], ["notes"], deferred=["notes"], tool_search=search, namespaces=True)  # type: ignore[arg-type]
    shaped = tools.responses_tools()
    for tool in shaped:
        TypeAdapter(ResponsesToolParam).validate_python(tool)
    if search == "server":  # the deferred tools sit in their server's namespace, still deferred
        space = next(t for t in shaped if t["type"] == "namespace")
        assert space["name"] == "notes"  # type: ignore[typeddict-item]
        inner = space["tools"]  # type: ignore[typeddict-item]
        assert {t["name"] for t in inner} == {n for n in tools.exposure.tools if n.startswith("notes_")}
        assert all(t["defer_loading"] for t in inner)
    else:  # what a client-executed search loads comes in its namespace too
        from openai.types.responses import ResponseInputItemParam

        search_call = {
            "type": "tool_search_call",
            "id": "ts_1",
            "call_id": "call_ts",
            "execution": "client",
            "status": "completed",
            "arguments": {"query": "shout text in capital letters"},
        }
        found = Response.model_validate(
            {
                "id": "resp_0",
                "object": "response",
                "created_at": 0,
                "model": "gpt-5.4",
                "output": [search_call],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        )
        [loaded] = tools.call_outputs(found)
        TypeAdapter(ResponseInputItemParam).validate_python(loaded)
        assert [(t["type"], t["name"]) for t in loaded["tools"]] == [("namespace", "notes")]
        assert [t["name"] for t in loaded["tools"][0]["tools"]] == ["notes_shout"]
    listed = OpenAITools(router, ["echo"], ["notes"], namespaces=True).responses_tools()
    assert [t.get("name") for t in listed] == ["echo", "notes"]
    call = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5.4",
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "namespace": "notes",
                    "name": "notes_shout",
                    "arguments": '{"text": "hi"}',
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    assert tools.call_outputs(call) == [{"type": "function_call_output", "call_id": "call_1", "output": "HI"}]
