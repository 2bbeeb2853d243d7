"""Issue 61 through the framework adapters: a real MCP server (stdio) answers in text, an image,
audio, an embedded PDF, an embedded text and a resource link; each framework's scripted model
calls it through toolroute's adapter, in the framework's own loop, and what that model is sent
next is read back: the server's bytes, unchanged and in order, in the framework's own form (or,
what the framework cannot carry, words saying so at their place). Where the framework has its
own MCP client (pydantic-ai, openai-agents, ADK) the same run goes through it too, side by side."""

from __future__ import annotations

import base64
import io
import json
import sys
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from _media_helpers import MEDIA_SERVER, PNG, Item, data_url_bytes, media_router, said_not_passed, trail

EVERY_KIND = ["B", "IMG", "WAV", "PDF", "N", "L", "A"]  # all carried, in the server's order
# Seconds the frameworks' own clients wait for the server (their defaults, 5 s, are too short on
# a loaded machine: a bound, not a timing).
STARTUP = 60.0


# ---- openai-agents --------------------------------------------------------------------------


async def _agents_run(tools: list[Any], mcp_servers: Sequence[Any] = ()) -> list[Item]:
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Recorded(Model):
        def __init__(self) -> None:
            self.inputs: list[Any] = []

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
            self.inputs.append(input)
            if len(self.inputs) == 1:
                out: Any = ResponseFunctionToolCall(type="function_call", call_id="c1", name="showcase", arguments="{}")
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                out = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    model = Recorded()
    agent = Agent(name="t", tools=tools, mcp_servers=list(mcp_servers), model=model)
    await Runner.run(agent, "show me", run_config=RunConfig(tracing_disabled=True))
    (answer,) = [i for i in model.inputs[1] if isinstance(i, dict) and i.get("type") == "function_call_output"]
    output = answer["output"]
    if isinstance(output, str):
        return [("text", output)]
    items: list[Item] = []
    for item in output:
        if item["type"] == "input_text":
            items.append(("text", item["text"]))
        elif item["type"] == "input_image":
            items.append(("bytes", data_url_bytes(item["image_url"])))
        elif item["type"] == "input_file":
            items.append(("bytes", data_url_bytes(item["file_data"])))
    return items


def test_openai_agents_tool_output_image_and_file_side_by_side_with_its_mcp_client(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents.mcp import MCPServerStdio

    from toolroute.adapters.openai_agents import AgentsTools

    with media_router(tmp_path) as router:
        ours = anyio.run(_agents_run, AgentsTools(router, [], ["media"]).function_tools())
    assert trail(ours) == ["B", "IMG", "w", "PDF", "N", "L", "A"]
    assert said_not_passed(ours, "w")  # the Responses API's tool output has no audio

    async def theirs_run() -> list[Item]:
        params = {"command": sys.executable, "args": [MEDIA_SERVER]}
        async with MCPServerStdio(params=params, client_session_timeout_seconds=STARTUP) as server:
            return await _agents_run([], [server])

    theirs = anyio.run(theirs_run)
    # The SDK's own client passes the image alike; the PDF and the audio go as JSON text (base64
    # the model reads as characters), where toolroute passes the PDF as a file and says the audio is not there.
    assert [v for k, v in theirs if k == "bytes"] == [PNG] == [v for k, v in ours if k == "bytes"][:1]
    assert any('"blob"' in v for k, v in theirs if k == "text")


# ---- pydantic-ai ----------------------------------------------------------------------------


def _pydantic_ai_run(toolset: Any) -> list[Item]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import BinaryContent, ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("showcase", {}, tool_call_id="c1")])
        seen.extend(returns)
        return ModelResponse(parts=[TextPart("done")])

    Agent(FunctionModel(model), toolsets=[toolset]).run_sync("show me")
    (part,) = seen
    content = part.content if isinstance(part.content, list) else [part.content]
    items: list[Item] = []
    for value in content:
        if isinstance(value, BinaryContent):
            items.append(("bytes", value.data))
        else:
            items.append(("text", value if isinstance(value, str) else json.dumps(value)))
    return items


def test_pydantic_ai_tool_return_with_binary_content_side_by_side_with_its_mcp_client(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    from toolroute.adapters.pydantic_ai import RouterToolset

    with media_router(tmp_path) as router:
        ours = _pydantic_ai_run(RouterToolset(router, [], ["media"]))
    assert trail(ours) == EVERY_KIND
    transport = StdioTransport(command=sys.executable, args=[MEDIA_SERVER])
    theirs = _pydantic_ai_run(MCPToolset(transport, init_timeout=STARTUP, read_timeout=STARTUP))
    # The same bytes, in the same order, as pydantic-ai's own MCP client gives the model.
    assert [v for k, v in ours if k == "bytes"] == [v for k, v in theirs if k == "bytes"]


# ---- Google ADK -----------------------------------------------------------------------------


def _adk_run(tools: list[Any]) -> Any:
    """The function response the scripted model was sent after its call."""
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    class Scripted(BaseLlm):
        model: str = "scripted"
        sent: list[LlmRequest] = []

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse]:
            self.sent.append(llm_request)
            if len(self.sent) == 1:
                call = types.FunctionCall(id="c1", name="showcase", args={})
                parts = [types.Part(function_call=call)]
            else:
                parts = [types.Part(text="done")]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    model = Scripted(sent=[])
    runner = InMemoryRunner(agent=LlmAgent(name="a", model=model, tools=tools), app_name="t")

    async def main() -> None:
        session = await runner.session_service.create_session(app_name="t", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="show me")])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass

    anyio.run(main)
    return next(
        p.function_response for c in model.sent[-1].contents for p in c.parts or [] if p.function_response is not None
    )


def test_adk_function_response_parts_side_by_side_with_its_mcp_client(tmp_path: Path) -> None:
    pytest.importorskip("google.adk")
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
    from mcp.client.stdio import StdioServerParameters

    from toolroute.adapters.adk import RouterToolset

    with media_router(tmp_path) as router:
        response = _adk_run([RouterToolset(router, [], ["media"])])
    # The text, each media marked at its place; the bytes in the function response's own parts.
    assert trail([("text", response.response["result"])]) == ["B", "i", "w", "p", "N", "L", "A"]
    parts = [("bytes", p.inline_data.data) for p in response.parts or []]
    assert trail(parts) == ["IMG", "WAV", "PDF"]
    assert [p.inline_data.mime_type for p in response.parts] == ["image/png", "audio/wav", "application/pdf"]

    server = StdioServerParameters(command=sys.executable, args=[MEDIA_SERVER])
    params = StdioConnectionParams(server_params=server, timeout=STARTUP)
    toolset = McpToolset(connection_params=params)
    try:
        theirs = _adk_run([toolset])
    finally:
        anyio.run(toolset.close)
    # ADK's own MCP tool answers with the result dumped as JSON: the same bytes, as base64 text
    # inside the response (no parts).
    assert not theirs.parts
    blocks = theirs.response["content"]
    assert base64.b64decode(blocks[1]["data"]) == PNG == parts[0][1]


# ---- LangChain / LangGraph ------------------------------------------------------------------


def test_langchain_tool_message_content_blocks_in_a_graph(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from toolroute.adapters.langchain import LangChainTools

    model = FakeMessagesListChatModel(
        responses=[AIMessage(content="", tool_calls=[{"name": "showcase", "args": {}, "id": "c1"}]), AIMessage("done")]
    )
    sent: list[list[Any]] = []

    def agent(state: MessagesState) -> dict[str, Any]:
        sent.append(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    with media_router(tmp_path) as router:
        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node("tools", LangChainTools(router, [], ["media"]).tool_node())
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END)
        builder.add_edge("tools", "agent")
        builder.compile().invoke({"messages": [HumanMessage("show me")]})
    (message,) = [m for m in sent[-1] if isinstance(m, ToolMessage)]
    items: list[Item] = []
    for block in message.content:
        if block["type"] == "text":
            items.append(("text", block["text"]))
        else:
            items.append(("bytes", base64.b64decode(block["base64"])))
    assert trail(items) == EVERY_KIND
    kinds = [(b["type"], b.get("mime_type")) for b in message.content if b["type"] != "text"]
    assert kinds == [("image", "image/png"), ("audio", "audio/wav"), ("file", "application/pdf")]


# ---- LlamaIndex -----------------------------------------------------------------------------


def test_llama_index_tool_output_blocks_reach_the_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import (
        AudioBlock,
        ChatMessage,
        DocumentBlock,
        ImageBlock,
        MessageRole,
        TextBlock,
        ToolCallBlock,
    )
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    from toolroute.adapters.llama_index import RouterToolSpec

    sent: list[list[ChatMessage]] = []

    def script(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        sent.append(list(messages))
        if not any(m.role == MessageRole.TOOL for m in messages):
            call = ToolCallBlock(tool_call_id="c1", tool_name="showcase", tool_kwargs={})
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content="done")

    with media_router(tmp_path) as router:
        tools = RouterToolSpec(router, [], ["media"]).to_tool_list()
        agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=script))
        anyio.run(lambda: agent.run(user_msg="show me"))
    (message,) = [m for m in sent[-1] if m.role == MessageRole.TOOL]
    items: list[Item] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            items.append(("text", block.text))
        elif isinstance(block, ImageBlock):
            items.append(("bytes", block.resolve_image().read()))
        elif isinstance(block, AudioBlock):
            assert block.format == "wav"
            items.append(("bytes", block.resolve_audio().read()))
        elif isinstance(block, DocumentBlock):
            assert block.document_mimetype == "application/pdf" and block.title == "q3.pdf"
            items.append(("bytes", block.resolve_document().read()))
    assert trail(items) == EVERY_KIND


# ---- smolagents -----------------------------------------------------------------------------


def test_smolagents_images_reach_the_model_with_the_step_and_the_rest_is_said(tmp_path: Path) -> None:
    pytest.importorskip("smolagents")
    from PIL import Image
    from smolagents import ToolCallingAgent
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

    from toolroute.adapters.smolagents import RouterTools

    sent: list[list[Any]] = []

    class Scripted(Model):
        def generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatMessage:
            sent.append(list(messages))
            step = sum(m.role == MessageRole.ASSISTANT for m in messages)
            name, arguments = ("showcase", {}) if step == 0 else ("final_answer", {"answer": "done"})
            function = ChatMessageToolCallFunction(name=name, arguments=json.dumps(arguments))
            call = ChatMessageToolCall(function=function, id=f"s{step}", type="function")
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

    with media_router(tmp_path) as router:
        tools = RouterTools(router, [], ["media"])
        agent = ToolCallingAgent(
            tools=tools.smolagents_tools(), model=Scripted(model_id="s"), step_callbacks=[tools.show_media]
        )
        assert agent.run("show me") == "done"
    later = sent[-1]
    texts = [c["text"] for m in later for c in m.content if isinstance(c, dict) and c.get("type") == "text"]
    observation = next(t for t in texts if "before the media" in t)
    items: list[Item] = [("text", observation)]
    assert trail(items) == ["B", "i", "w", "p", "N", "L", "A"]
    assert said_not_passed(items, "w") and said_not_passed(items, "p")  # smolagents shows images only
    images = [c["image"] for m in later for c in m.content if isinstance(c, dict) and c.get("type") == "image"]
    # smolagents holds an image as a PIL image (and encodes it itself): the pixels are the server's.
    (shown,) = images
    assert list(shown.convert("RGB").getdata()) == list(Image.open(io.BytesIO(PNG)).convert("RGB").getdata())
