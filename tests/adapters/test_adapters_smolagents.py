"""smolagents: the tools in a scripted `ToolCallingAgent` run (a scripted `Model`, as
smolagents' own tests script theirs; no network), approval by the adapter's approver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _framework_script import FINAL, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, TURNS, Call, World, world

pytest.importorskip("smolagents")

from smolagents import ToolCallingAgent
from smolagents.agents import ToolOutput
from smolagents.memory import ActionStep, FinalAnswerStep, ToolCall
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

from toolroute.adapters.smolagents import RouterTools, identifiers, inputs

__all__ = ["world"]


def _turns() -> list[list[Call]]:
    """The shared script, with the calls smolagents itself refuses before any tool runs (an
    argument it does not know, a name it does not have) each in a step of its own: a step with
    such a call loses its other calls' observations (its rule, for every tool)."""
    out = []
    for turn in TURNS:
        own = [c for c in turn if c.id in ("e1", "e3")]
        rest = [c for c in turn if c.id not in ("e1", "e3")]
        out += [[c] for c in own] + [rest]
    return [*out, [Call("w1", "word-count", {}, "demo:word-count")]]


class ScriptedModel(Model):
    def __init__(self, names: dict[str, str]) -> None:
        super().__init__(model_id="scripted")
        self.turns = _turns()
        self.names = names  # exposed name -> smolagents name

    def generate(self, messages: list[Any], stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:  # fmt: skip
        step = sum(m.role == MessageRole.ASSISTANT for m in messages)
        calls = (
            [(c.id, self.names.get(c.name, c.name), c.arguments) for c in self.turns[step]]
            if step < len(self.turns)
            else [("final", "final_answer", {"answer": FINAL})]
        )
        tool_calls = [
            ChatMessageToolCall(
                function=ChatMessageToolCallFunction(name=name, arguments=json.dumps(args)), id=call_id, type="function"
            )
            for call_id, name, args in calls
        ]
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=tool_calls)


def run(agent: ToolCallingAgent) -> tuple[Any, dict[str, str]]:
    """The run's final answer, and what each call's observation (or its step's error) said."""
    seen: dict[str, str] = {}
    pending: list[str] = []  # the step's calls, in case the step fails as a whole
    final = None
    for event in agent.run("go", stream=True):
        if isinstance(event, ToolCall):
            pending.append(event.id)
        elif isinstance(event, ToolOutput):
            seen[event.id] = event.observation
        elif isinstance(event, ActionStep):
            for call_id in pending:
                if event.error is not None and call_id not in seen:
                    seen[call_id] = str(event.error)
            pending = []
        elif isinstance(event, FinalAnswerStep):
            final = event.output
    return final, seen


def test_a_scripted_run_reaches_every_outcome_as_smolagents_expects(world: World) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def approve(name: str, arguments: Any) -> bool | str:
        asked.append((name, dict(arguments)))
        return True if arguments["tag"] == "approved" else "not this one"

    tools = RouterTools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL, approve=approve)
    model = ScriptedModel(tools.names)
    agent = ToolCallingAgent(tools=tools.smolagents_tools(), model=model, max_steps=20, verbosity_level=0)
    final, world.seen = run(agent)
    assert final == FINAL
    assert sorted(a[1]["tag"] for a in asked) == ["approved", "rejected"]
    assert "rejected: not this one" in world.seen["a2"]
    assert "demo:word-count" in world.seen["w1"]  # an MCP name that is no identifier, reached
    world.check(expect={"e1": "argument paht is not in the tool's input schema"})  # smolagents' own check


def test_names_are_identifiers_stable_and_reversible() -> None:
    names = identifiers(["word-count", "word_count", "class", "3d", "text.shout", "ok"])
    assert names == {
        "word-count": "word_count",
        "word_count": "word_count_2",
        "class": "class_",
        "3d": "_3d",
        "text.shout": "text_shout",
        "ok": "ok",
    }
    assert identifiers(list(names)) == names  # the same listing, the same names


def test_inputs_keep_the_schema_as_declared() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "title": "Path", "description": "where"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "person": {"$ref": "#/$defs/Person"},
        },
        "required": ["path", "person"],
        "$defs": {
            "Person": {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False}
        },
    }
    got = inputs(schema)
    assert got["path"] == {"type": "string", "title": "Path", "description": "where"}
    assert got["mode"]["enum"] == ["a", "b"] and got["mode"]["nullable"] is True
    assert got["limit"]["type"] == ["integer", "null"]
    assert got["person"]["type"] == "object" and got["person"]["additionalProperties"] is False
    assert "nullable" not in got["person"]
