"""Google ADK: the toolset in a scripted run (a scripted `BaseLlm`, as ADK's own tests script
their model; no network), through ADK's `InMemoryRunner`, approval by ADK's tool confirmation."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest
from _framework_script import APPROVED, FINAL, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, REJECTED, TURNS, World, world

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from toolroute.adapters.adk import RouterToolset

__all__ = ["world"]
CONFIRM = "adk_request_confirmation"


class ScriptedLlm(BaseLlm):
    """Answers each request with the script's next turn, and keeps what it was sent."""

    model: str = "scripted"
    sent: list[LlmRequest] = []
    turn: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse]:
        self.sent.append(llm_request)
        turn, self.turn = self.turn, self.turn + 1
        if turn >= len(TURNS):
            parts = [types.Part(text=FINAL)]
        else:
            parts = [
                types.Part(function_call=types.FunctionCall(id=c.id, name=c.name, args=c.arguments))
                for c in TURNS[turn]
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def answers(request: LlmRequest) -> dict[str, str]:
    seen = {}
    for content in request.contents:
        for part in content.parts or []:
            response = part.function_response
            if response is not None and response.id and response.name != CONFIRM:
                seen[response.id] = json.dumps(response.response)
    return seen


def test_a_scripted_run_reaches_every_outcome_as_adk_expects(world: World) -> None:
    model = ScriptedLlm()
    toolset = RouterToolset(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    agent = LlmAgent(name="coder", model=model, tools=[toolset])
    runner = InMemoryRunner(agent=agent, app_name="toolroute")

    async def main() -> list[Any]:
        session = await runner.session_service.create_session(app_name="toolroute", user_id="u1")
        asks: list[Any] = []

        async def run(message: types.Content) -> None:
            async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
                for call in event.get_function_calls():
                    if call.name == CONFIRM:
                        asks.append(call)

        await run(types.Content(role="user", parts=[types.Part(text="go")]))
        assert world.log.read_text() == ""  # both record calls wait for a person
        asked_for = {a.args["originalFunctionCall"]["id"]: a.id for a in asks}
        assert set(asked_for) == {APPROVED, REJECTED}
        replies = [
            types.Part(
                function_response=types.FunctionResponse(
                    id=asked_for[call_id], name=CONFIRM, response={"confirmed": call_id == APPROVED}
                )
            )
            for call_id in (APPROVED, REJECTED)
        ]
        await run(types.Content(role="user", parts=replies))
        return asks

    anyio.run(main)
    world.seen = answers(model.sent[-1])
    assert "rejected" in world.seen[REJECTED]
    # Results are dicts: a structured result as its fields, an error under "error" with its kind.
    assert '{"words": 3' in world.seen["c1"] and '"kind": "bad_arguments"' in world.seen["e1"]
    assert '"kind": "failed"' in world.seen["e5"] and '"kind": "refused"' in world.seen["e4"]
    world.check()


def test_tool_filter_and_prefix_apply_and_a_prefixed_call_reaches_its_tool(world: World) -> None:
    class OneCall(ScriptedLlm):
        shown: list[str] = []

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse]:
            self.sent.append(llm_request)
            if not self.shown:
                self.shown.extend(llm_request.tools_dict)
                call = types.FunctionCall(id="r1", name="tr_read_file", args={"path": "notes.txt"})
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            else:
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=FINAL)]))

    model = OneCall()
    toolset = RouterToolset(
        world.router, FUNCTIONS, MCP_SERVERS, tool_filter=["read_file", "word_stats"], tool_name_prefix="tr"
    )
    runner = InMemoryRunner(agent=LlmAgent(name="coder", model=model, tools=[toolset]), app_name="toolroute")

    async def main() -> None:
        session = await runner.session_service.create_session(app_name="toolroute", user_id="u1")
        message = types.Content(role="user", parts=[types.Part(text="go")])
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            pass

    anyio.run(main)
    assert sorted(model.shown) == ["tr_read_file", "tr_word_stats"]
    assert "alpha" in answers(model.sent[-1])["r1"]
