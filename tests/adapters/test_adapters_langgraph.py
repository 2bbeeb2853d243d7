"""LangGraph: the shared scripted run through a graph whose tool node is `tool_node()` (langchain's
own `FakeMessagesListChatModel` as the model, no network); approval by LangGraph's interrupt,
asked once for the batch, resumed with an answer per call; sync and async."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from _framework_script import APPROVED, FINAL, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, REJECTED, TURNS, World, world

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from toolroute.adapters.langchain import LangChainTools

__all__ = ["world"]


def scripted_model() -> FakeMessagesListChatModel:
    responses = [
        AIMessage(content="", tool_calls=[{"name": c.name, "args": c.arguments, "id": c.id} for c in turn])
        for turn in TURNS
    ]
    return FakeMessagesListChatModel(responses=[*responses, AIMessage(content=FINAL)])


def graph(tools: LangChainTools) -> Any:
    model = scripted_model()

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools.tool_node())
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_scripted_graph_asks_once_per_batch_and_runs_each_call_once(world: World, mode: str) -> None:
    tools = LangChainTools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    app = graph(tools)
    config = {"configurable": {"thread_id": f"t-{mode}"}}

    def invoke(value: Any) -> Any:
        if mode == "sync":
            return app.invoke(value, config)
        return anyio.run(lambda: app.ainvoke(value, config))

    paused = invoke({"messages": [HumanMessage("go")]})
    (asked,) = paused["__interrupt__"]  # one interrupt for the whole batch
    assert sorted(c["id"] for c in asked.value["approval"]) == [APPROVED, REJECTED]
    assert world.log.read_text() == ""  # nothing ran before the answers
    done = invoke(Command(resume={APPROVED: True, REJECTED: "not this one"}))
    assert done["messages"][-1].content == FINAL
    replies = {m.tool_call_id: m for m in done["messages"] if isinstance(m, ToolMessage)}
    world.seen = {i: str(m.content) for i, m in replies.items()}
    assert replies[REJECTED].status == "error" and "not this one" in world.seen[REJECTED]
    # Structure and trace ride along as the artifact; the kind says what became of the call.
    assert replies["c1"].artifact["structured"] == {"words": 3, "longest": "routers"}
    assert replies["e5"].artifact["kind"] == "failed" and replies["e1"].artifact["kind"] == "bad_arguments"
    assert replies["e3"].status == "error" and replies["c2"].artifact["trace"]["path"] == "notes.txt"
    world.check()
