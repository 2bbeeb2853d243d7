"""toolroute's MCP server and adapter dispatch vs what a user would otherwise write.

Groups (toolroute case named `*toolroute*`, see benches/report.py):
- mcp_session_50_calls: open an in-process MCP session and make 50 tool calls, served by
  `toolroute.serve` vs the SDK's own `MCPServer` decorator server.
- openai_tool_messages_20_calls: answer 20 recorded Chat Completions tool calls with
  `OpenAITools.tool_messages` vs a hand-written dispatch dict (json.loads + pydantic + json.dumps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute.adapters.openai import OpenAITools
from toolroute.serve import ServedTools, build_server

CALLS = 50


@function_tool(read_only=True)
def shout(text: str, times: int = 1) -> str:
    """Upper-case a text."""
    return text.upper() * times


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> ToolRouter:
    r = ToolRouter(context=BuiltInToolContext(Path(tmp_path_factory.mktemp("ws"))))
    r.register(shout)
    yield r
    r.close()


async def _session(target: Any) -> None:
    async with Client(target) as client:
        for i in range(CALLS):
            result = await client.call_tool("shout", {"text": f"x{i}", "times": 2})
            assert not result.is_error


@pytest.mark.benchmark(group="mcp_session_50_calls")
def test_mcp_session_toolroute_serve(benchmark: Any, router: ToolRouter) -> None:
    server = build_server(ServedTools(router, ["shout"]))
    benchmark.pedantic(lambda: anyio.run(_session, server), rounds=20, iterations=1, warmup_rounds=2)


@pytest.mark.benchmark(group="mcp_session_50_calls")
def test_mcp_session_sdk_mcpserver(benchmark: Any) -> None:
    mcp = MCPServer("plain")

    @mcp.tool()
    def shout(text: str, times: int = 1) -> str:
        """Upper-case a text."""
        return text.upper() * times

    benchmark.pedantic(lambda: anyio.run(_session, mcp), rounds=20, iterations=1, warmup_rounds=2)


def _completion(n: int) -> ChatCompletion:
    calls = [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "shout", "arguments": json.dumps({"text": f"t{i}", "times": 2})}}
        for i in range(n)
    ]  # fmt: skip
    return ChatCompletion.model_validate(
        {
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": calls}}],
        }
    )  # fmt: skip


class ShoutArgs(BaseModel):
    text: str
    times: int = 1


def _hand_written_dispatch(completion: ChatCompletion) -> list[dict[str, Any]]:
    handlers = {"shout": (ShoutArgs, lambda a: a.text.upper() * a.times)}
    out = []
    for call in completion.choices[0].message.tool_calls or []:
        model, fn = handlers[call.function.name]
        result = fn(model.model_validate(json.loads(call.function.arguments)))
        out.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return out


@pytest.mark.benchmark(group="openai_tool_messages_20_calls")
def test_openai_dispatch_toolroute(benchmark: Any, router: ToolRouter) -> None:
    tools, completion = OpenAITools(router, ["shout"]), _completion(20)
    assert benchmark(tools.tool_messages, completion) == _hand_written_dispatch(completion)


@pytest.mark.benchmark(group="openai_tool_messages_20_calls")
def test_openai_dispatch_hand_written(benchmark: Any) -> None:
    benchmark(_hand_written_dispatch, _completion(20))
