"""Per-call dispatch inside each framework (issue 42): a scripted run with one tool call, the
framework's own function tool against the toolroute-backed tool doing the same work, interleaved.

Run: python -m pytest benches/bench_frameworks.py -s   (interleaved: benches/_interleave.py)

The work is one small pure function (`count_words`): the framework's native tool wraps it as the
framework's documentation shows; the toolroute side registers it with `@function_tool` and
exposes it through the framework's adapter. Each run is the framework's own loop (its scripted
test model asks for the tool, then answers), so what differs is the tool's dispatch. Each side's
answer (what the model was sent for the call) is checked equal before timing. Ratio = native
time / toolroute time (above 1: the toolroute-backed tool costs less).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from _interleave import compare

from toolroute import ToolRouter, function_tool

ROUNDS = 40
TEXT = "tool routers route tool calls"


def count_words(text: str) -> str:
    """Count the words of a text."""
    return f"{len(text.split())} words"


@pytest.fixture
def router() -> Iterator[ToolRouter]:
    with ToolRouter() as router:
        router.register(function_tool(read_only=True)(count_words))
        yield router


def _same_text(a: Any, b: Any) -> bool:
    return "5 words" in str(a) and "5 words" in str(b)


def test_pydantic_ai(router: ToolRouter) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from toolroute.adapters.pydantic_ai import RouterToolset

    def model(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("count_words", {"text": TEXT}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    native = Agent(FunctionModel(model), tools=[count_words])
    toolset = RouterToolset(router, ["count_words"])
    ours = Agent(FunctionModel(model), tools=toolset.as_tools())
    as_toolset = Agent(FunctionModel(model), toolsets=[toolset])

    def run(agent: Any) -> Callable[[], Any]:
        def once() -> Any:
            result = agent.run_sync("go")
            parts = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
            return parts[0].content

        return once

    compare("pydantic-ai run with one tool call", ("toolroute RouterToolset.as_tools()", run(ours)),
            {"pydantic-ai function tool": run(native), "toolroute as a toolset (toolsets=)": run(as_toolset)},
            ROUNDS, same=_same_text)  # fmt: skip


def test_langgraph_tool_node(router: ToolRouter) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from toolroute.adapters.langchain import LangChainTools

    def graph(node: Any) -> Any:
        builder = StateGraph(MessagesState)
        builder.add_node("tools", node)
        builder.add_edge(START, "tools")
        builder.add_edge("tools", END)
        return builder.compile()

    native = graph(ToolNode([tool(count_words)]))
    ours = graph(LangChainTools(router, ["count_words"]).tool_node())
    state = {"messages": [AIMessage("", tool_calls=[{"name": "count_words", "args": {"text": TEXT}, "id": "c1"}])]}

    def run(app: Any) -> Callable[[], Any]:
        return lambda: app.invoke(state)["messages"][-1].content

    compare("LangGraph tool node, one call", ("toolroute tool_node()", run(ours)),
            {"langgraph ToolNode": run(native)}, ROUNDS, same=_same_text)  # fmt: skip


def test_openai_agents(router: ToolRouter) -> None:
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner
    from agents import function_tool as agents_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from toolroute.adapters.openai_agents import AgentsTools

    tools = AgentsTools(router, ["count_words"])
    config = RunConfig(tracing_disabled=True)

    def run(make_tools: Callable[[], list[Any]]) -> Callable[[], Any]:
        def once() -> Any:
            model = ScriptedModel(
                [[function_call("count_words", {"text": TEXT}, call_id="c1")], [assistant_message("done")]]
            )
            agent = Agent(name="a", model=model, tools=make_tools())
            anyio.run(lambda: Runner.run(agent, "go", run_config=config))
            (answer,) = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("call_id") == "c1"
                         and i.get("type") == "function_call_output"]  # fmt: skip
            return answer["output"]

        return once

    native_tool = agents_tool(count_words)
    ours = tools.function_tools()
    compare("openai-agents Runner, one tool call", ("toolroute AgentsTools", run(lambda: ours)),
            {"agents function_tool": run(lambda: [native_tool])}, ROUNDS, same=_same_text)  # fmt: skip


def test_smolagents(router: ToolRouter) -> None:
    pytest.importorskip("smolagents")
    from smolagents import ToolCallingAgent
    from smolagents import tool as smol_tool
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

    from toolroute.adapters.smolagents import RouterTools

    class Scripted(Model):
        def generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatMessage:
            done = any(m.role == MessageRole.TOOL_RESPONSE for m in messages)
            name, args_ = ("final_answer", {"answer": "done"}) if done else ("count_words", {"text": TEXT})
            call = ChatMessageToolCall(
                function=ChatMessageToolCallFunction(name=name, arguments=json.dumps(args_)), id="c1", type="function"
            )
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

    def native_fn(text: str) -> str:
        """Count the words of a text.

        Args:
            text: the text
        """
        return count_words(text)

    native_fn.__name__ = "count_words"
    native = smol_tool(native_fn)
    ours = RouterTools(router, ["count_words"]).smolagents_tools()

    def run(tools: list[Any]) -> Callable[[], Any]:
        def once() -> Any:
            agent = ToolCallingAgent(tools=tools, model=Scripted(model_id="s"), max_steps=3, verbosity_level=0)
            agent.run("go")
            return agent.memory.steps[1].observations

        return once

    compare("smolagents ToolCallingAgent, one tool call", ("toolroute RouterTools", run(ours)),
            {"smolagents @tool": run([native])}, ROUNDS, same=_same_text)  # fmt: skip


def test_llama_index(router: ToolRouter) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    from toolroute.adapters.llama_index import RouterToolSpec

    def script(messages: Any, **kwargs: Any) -> ChatMessage:
        if any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role=MessageRole.ASSISTANT, content="done")
        block = ToolCallBlock(tool_call_id="c1", tool_name="count_words", tool_kwargs={"text": TEXT})
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])

    native = [FunctionTool.from_defaults(fn=count_words)]
    ours = RouterToolSpec(router, ["count_words"]).to_tool_list()

    def run(tools: list[Any]) -> Callable[[], Any]:
        def once() -> Any:
            agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=script))

            async def main() -> Any:
                handler = agent.run(user_msg="go")
                outputs = [e async for e in handler.stream_events() if type(e).__name__ == "ToolCallResult"]
                await handler
                return outputs[0].tool_output.content

            return anyio.run(main)

        return once

    compare("LlamaIndex FunctionAgent, one tool call", ("toolroute RouterToolSpec", run(ours)),
            {"llama-index FunctionTool": run(native)}, ROUNDS, same=_same_text)  # fmt: skip


def test_adk(router: ToolRouter) -> None:
    pytest.importorskip("google.adk")
    from collections.abc import AsyncGenerator

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from toolroute.adapters.adk import RouterToolset

    class Scripted(BaseLlm):
        model: str = "scripted"
        seen: list[Any] = []

        async def generate_content_async(
            self, request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse]:
            answered = [p.function_response for c in request.contents for p in c.parts or [] if p.function_response]
            if answered:
                self.seen.append(answered[0].response)
                parts = [types.Part(text="done")]
            else:
                call = types.FunctionCall(id="c1", name="count_words", args={"text": TEXT})
                parts = [types.Part(function_call=call)]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    def run(tools: list[Any]) -> Callable[[], Any]:
        def once() -> Any:
            model = Scripted()
            runner = InMemoryRunner(agent=LlmAgent(name="a", model=model, tools=tools), app_name="b")

            async def main() -> None:
                session = await runner.session_service.create_session(app_name="b", user_id="u")
                message = types.Content(role="user", parts=[types.Part(text="go")])
                async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                    pass

            anyio.run(main)
            return model.seen[0]

        return once

    toolset = run([RouterToolset(router, ["count_words"])])
    compare("Google ADK runner, one tool call", ("toolroute RouterToolset", toolset),
            {"adk function tool": run([count_words])}, ROUNDS, same=_same_text)  # fmt: skip
