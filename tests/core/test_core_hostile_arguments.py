"""Hostile arguments never escape as raw exceptions: generated JSON (deep nesting, huge numbers,
huge strings, duplicate keys, NaN, lone surrogates, invalid UTF-8) thrown at every entry point
(invoke, ainvoke, execute, aexecute, ExposedTools, the OpenAI and Anthropic adapters) gives a
result or a typed toolroute error, never anything else; the adapters never raise at all."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute.allowlist import ExposedTools
from toolroute.errors import ToolArgumentError, ToolError
from toolroute.router import MAX_ARGUMENT_DEPTH


@function_tool(name="take_anything", description="accepts any JSON value", quick=True)
def take_anything(data: Any = None) -> str:
    return json.dumps(data)[:100]


def _nested(depth: int, open_: str, close: str, inner: str) -> str:
    return open_ * depth + inner + close * depth


hostile_text = st.one_of(
    st.integers(100, 50_000).map(lambda d: '{"data": ' + _nested(d, "[", "]", "1") + "}"),
    st.integers(100, 50_000).map(lambda d: '{"data": ' + _nested(d, '{"a":', "}", "1") + "}"),
    st.integers(4_000, 20_000).map(lambda n: '{"data": ' + "9" * n + "}"),
    st.integers(4_000, 20_000).map(lambda n: '{"pattern": -' + "1" * n + "}"),
    st.integers(1, 400_000).map(lambda n: '{"data": "' + "x" * n + '"}'),
    st.just('{"data": 1, "data": 2, "pattern": "a", "pattern": "b"}'),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]).map(lambda v: '{"data": ' + v + "}"),
    st.sampled_from(["\\ud800", "\\udfff", "a\\ud83d", "\\u0000"]).map(lambda v: '{"pattern": "' + v + '"}'),
    st.text(max_size=200),
)
hostile_bytes = st.binary(max_size=200).map(lambda b: b'{"data": "' + b + b'"}')
hostile = st.one_of(hostile_text, hostile_bytes)


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Any:
    r = ToolRouter(context=BuiltInToolContext(tmp_path_factory.mktemp("ws")))
    r.register(take_anything)
    yield r
    r.close()


def _direct(router: ToolRouter, entry: str, name: str, argument: Any) -> Any:
    if entry == "invoke":
        return router.invoke(name, argument)
    if entry == "execute":
        return router.execute(name, argument).text
    if entry == "ainvoke":
        return anyio.run(router.ainvoke, name, argument)
    return anyio.run(router.aexecute, name, argument).text


@settings(max_examples=150, deadline=None)
@given(
    argument=hostile,
    entry=st.sampled_from(["invoke", "execute", "ainvoke", "aexecute"]),
    name=st.sampled_from(["glob", "take_anything"]),
)
def test_the_router_answers_or_raises_a_typed_error(router: ToolRouter, argument: Any, entry: str, name: str) -> None:
    try:
        result = _direct(router, entry, name, argument)
    except ToolError:
        return
    assert isinstance(result, str)


@settings(max_examples=100, deadline=None)
@given(argument=hostile, name=st.sampled_from(["glob", "take_anything"]))
def test_exposed_tools_and_the_adapters_never_raise(router: ToolRouter, argument: Any, name: str) -> None:
    from toolroute.adapters.anthropic import AnthropicTools
    from toolroute.adapters.openai import OpenAITools

    exposed = ExposedTools(router, ["glob", "take_anything"])
    for outcome in (exposed.execute(name, argument), anyio.run(exposed.aexecute, name, argument)):
        assert isinstance(outcome.text, str)
    call = SimpleNamespace(id="c1", type="function", function=SimpleNamespace(name=name, arguments=argument))
    (message,) = OpenAITools(router, ["glob", "take_anything"]).tool_messages([call])
    assert message["role"] == "tool" and isinstance(message["content"], str)
    block = SimpleNamespace(type="tool_use", id="t1", name=name, input=argument)
    (result,) = AnthropicTools(router, ["glob", "take_anything"]).tool_results([block])
    assert result["type"] == "tool_result"


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 100_000])
def test_deep_mappings_are_refused_with_the_bound(router: ToolRouter, depth: int) -> None:
    data: dict[str, Any] = {}
    node = data
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ToolArgumentError, match=f"more than {MAX_ARGUMENT_DEPTH} levels"):
        router.invoke("take_anything", {"data": data})


def test_arguments_at_the_bound_still_work(router: ToolRouter, tmp_path: Path) -> None:
    data = _nested(MAX_ARGUMENT_DEPTH - 2, "[", "]", "1")
    assert router.invoke("take_anything", '{"data": ' + data + "}").startswith("[[[")


@settings(max_examples=60, deadline=None)
@given(argument=hostile_text, name=st.sampled_from(["glob", "take_anything"]))
def test_the_served_door_answers_every_hostile_call(router: ToolRouter, argument: str, name: str) -> None:
    """What `toolroute serve` runs per `tools/call` (after the SDK parsed the JSON-RPC): the
    arguments object as the client sent it, here parsed by Python's own json where it can be."""
    from toolroute.serve.doors import ServedTools

    try:
        value = json.loads(argument)
    except (ValueError, RecursionError):
        value = {"data": argument}  # the SDK would have refused it; its text still goes in
    arguments = value if isinstance(value, dict) else {"data": value}
    result = anyio.run(ServedTools(router, ["glob", "take_anything"]).call, name, arguments)
    assert isinstance(result.content[0].text, str)
