"""Deferred tools in the framework toolsets (ADK, LangChain and LangGraph, LlamaIndex,
smolagents), each in a scripted session with that framework's own test model (no network): the
model first sees only the listed tools and `search_tools`, searches, then sees the found tool
from its next step on and calls it; the allowlist stays the ceiling (a tool found by a search
of another allowlist, or a name outside this one, never joins)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pytest

from toolroute import ToolRouter
from toolroute.allowlist import CallOutcome, ExposedTools, OutcomeKind

FUNCTIONS, SERVERS, DEFERRED = ["echo"], ["notes"], ["notes"]
SEARCH = {"query": "upper case text"}
FOUND = "notes_shout"
LISTED = ["echo", "search_tools"]


def test_found_counts_only_this_allowlists_searches_and_deferred_tools(router: ToolRouter) -> None:
    tools = ExposedTools(router, FUNCTIONS, SERVERS, deferred=DEFERRED)
    outcome = tools.execute("search_tools", SEARCH)
    assert FOUND in json.loads(outcome.text)["tools"][0]["name"]
    assert tools.found([("search_tools", outcome.trace)]) == [FOUND]
    # A trace that names tools, from a tool that is not the search: nothing found.
    assert tools.found([("echo", {"found": [FOUND]})]) == []
    # A search result naming a listed tool, an unknown one, another allowlist's: none join.
    assert tools.found([("search_tools", {"found": ["echo", "bash", "other_tool", FOUND, FOUND]})]) == [FOUND]
    assert ExposedTools(router, FUNCTIONS, SERVERS).found([("search_tools", {"found": [FOUND]})]) == []


def test_findings_keep_each_found_tool_once_and_hand_out_each_once(router: ToolRouter) -> None:
    tools = ExposedTools(router, FUNCTIONS, SERVERS, deferred=DEFERRED)
    findings = tools.findings()
    search = tools.execute("search_tools", SEARCH)
    findings.note("echo", CallOutcome("x", OutcomeKind.OK, trace={"found": [FOUND]}))  # not the search
    assert findings.all() == [] and findings.take() == []
    findings.note("search_tools", search)
    assert findings.take() == [FOUND]
    findings.note("search_tools", search)  # found again: nothing new
    assert findings.take() == [] and findings.all() == [FOUND]
    # Calls on a framework's threads, each finding the same tool: it is kept once, none lost.
    others = tools.findings()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: others.note("search_tools", search), range(40)))
    assert others.all() == [FOUND] and others.take() == [FOUND] and others.take() == []


def test_adk_session_gains_what_its_search_found(router: ToolRouter) -> None:
    pytest.importorskip("google.adk")
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from toolroute.adapters.adk import FOUND as STATE_KEY
    from toolroute.adapters.adk import RouterToolset

    shown: list[list[str]] = []
    responses: list[Any] = []

    class Scripted(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse]:
            shown.append(sorted(llm_request.tools_dict))
            for content in llm_request.contents:
                responses.extend(p.function_response for p in content.parts or [] if p.function_response)
            step = len(shown)
            if step == 1:
                call = types.FunctionCall(id="s1", name="search_tools", args=SEARCH)
            elif step == 2:
                call = types.FunctionCall(id="c1", name=FOUND, args={"text": "hi"})
            else:
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))
                return
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))

    toolset = RouterToolset(router, FUNCTIONS, SERVERS, deferred=DEFERRED)
    runner = InMemoryRunner(agent=LlmAgent(name="a", model=Scripted(), tools=[toolset]), app_name="t")

    async def main() -> dict[str, Any]:
        session = await runner.session_service.create_session(app_name="t", user_id="u1")
        message = types.Content(role="user", parts=[types.Part(text="go")])
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            pass
        kept = await runner.session_service.get_session(app_name="t", user_id="u1", session_id=session.id)
        assert kept is not None
        return dict(kept.state)

    state = anyio.run(main)
    assert shown[0] == LISTED  # deferred: not shown before a search
    assert shown[1] == sorted([*LISTED, FOUND])  # found: shown from the next call on
    assert state[STATE_KEY] == [FOUND]  # kept in the session, for its later runs
    assert [r.response for r in responses if r.id == "c1"] == [{"result": "HI"}]


def test_langgraph_binds_what_the_conversations_search_found(router: ToolRouter) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from toolroute.adapters.langchain import LangChainTools

    tools = LangChainTools(router, FUNCTIONS, SERVERS, deferred=DEFERRED)
    shown: list[list[str]] = []
    script = iter(
        [
            AIMessage("", tool_calls=[{"id": "s1", "name": "search_tools", "args": SEARCH}]),
            AIMessage("", tool_calls=[{"id": "c1", "name": FOUND, "args": {"text": "hi"}}]),
            AIMessage("done"),
        ]
    )

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            shown.append(sorted(t.name for t in tools))
            return self

    model = Scripted(messages=script)

    def call_model(state: dict[str, Any]) -> dict[str, list[BaseMessage]]:
        messages = state["messages"]
        return {"messages": [model.bind_tools(tools.base_tools(messages)).invoke(messages)]}

    def route(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tools.tool_node())
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    final = graph.compile().invoke({"messages": [HumanMessage("go")]})
    assert shown[0] == LISTED and shown[1] == sorted([*LISTED, FOUND])
    answers = {m.tool_call_id: m.content for m in final["messages"] if isinstance(m, ToolMessage)}
    assert answers["c1"] == "HI"
    # Bound again from the same conversation, the found tool stays; a fresh one starts without it.
    assert FOUND in [t.name for t in tools.base_tools(final["messages"])]
    assert FOUND not in [t.name for t in tools.base_tools([HumanMessage("go")])]


def test_llama_index_agent_gains_what_its_search_found(router: ToolRouter) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    from toolroute.adapters.llama_index import RouterToolSpec

    spec = RouterToolSpec(router, FUNCTIONS, SERVERS, deferred=DEFERRED)
    shown: list[list[str]] = []
    answers: dict[str, str] = {}

    class Scripted(MockFunctionCallingLLM):
        def _prepare_chat_with_tools(self, tools: Sequence[Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
            shown.append(sorted(t.metadata.name for t in tools))
            return super()._prepare_chat_with_tools(tools, *args, **kwargs)

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        tool_results = [m for m in messages if m.role == MessageRole.TOOL]
        answers.update({str(m.additional_kwargs.get("tool_call_id")): str(m.content) for m in tool_results})
        step = sum(m.role == MessageRole.ASSISTANT for m in messages)
        if step == 0:
            block = ToolCallBlock(tool_call_id="s1", tool_name="search_tools", tool_kwargs=SEARCH)
        elif step == 1:
            block = ToolCallBlock(tool_call_id="c1", tool_name=FOUND, tool_kwargs={"text": "hi"})
        else:
            return ChatMessage(role=MessageRole.ASSISTANT, content="done")
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])

    agent = FunctionAgent(
        tools=spec.to_tool_list(), tool_retriever=spec.found_tools(), llm=Scripted(response_generator=respond)
    )

    async def main() -> Any:
        return await agent.run(user_msg="go")

    result = anyio.run(main)
    assert "done" in str(result)
    assert shown[0] == LISTED and shown[1] == sorted([*LISTED, FOUND])
    assert answers["c1"] == "HI"


def test_smolagents_agent_gains_what_its_search_found(router: ToolRouter) -> None:
    pytest.importorskip("smolagents")
    from smolagents import ToolCallingAgent
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

    from toolroute.adapters.smolagents import RouterTools

    tools = RouterTools(router, FUNCTIONS, SERVERS, deferred=DEFERRED)
    shown: list[list[str]] = []

    class Scripted(Model):
        def generate(self, messages: list[Any], stop_sequences: Any = None, response_format: Any = None,
                     tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:  # fmt: skip
            shown.append(sorted(t.name for t in tools_to_call_from or []))
            step = sum(m.role == MessageRole.ASSISTANT for m in messages)
            name, args = [("search_tools", SEARCH), (FOUND, {"text": "hi"}), ("final_answer", {"answer": "done"})][step]
            function = ChatMessageToolCallFunction(name=name, arguments=json.dumps(args))
            call = ChatMessageToolCall(function=function, id=f"t{step}", type="function")
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

    agent = ToolCallingAgent(
        tools=tools.smolagents_tools(), model=Scripted(model_id="scripted"), step_callbacks=[tools.load_found]
    )
    steps = agent.run("go", return_full_result=True).steps
    observations = [s.get("observations") for s in steps if isinstance(s, dict)]
    listed = sorted([*LISTED, "final_answer"])
    assert shown[0] == listed and shown[1] == sorted([*listed, FOUND])
    assert any(o and "HI" in o for o in observations)
