"""Arguments as JSON text take a one-pass path (pydantic-core parses and validates together) for
tools with a request model; the general path parses, walks the depth, then validates. Both must
give the same answer for any text a model may send: the same result, or the same error (the
one-pass path declines on any failure, and the general path words it). Hypothesis, over JSON
objects that come close to the request's shape and ones that do not."""

from __future__ import annotations

import json
from datetime import date
from enum import Enum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolroute import ToolRouter, function_tool
from toolroute.errors import ToolError


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    n: int
    tags: list[str] = []


class Request(BaseModel):
    a: int
    b: float = 0.0
    name: str = ""
    flag: bool = False
    colour: Colour = Colour.RED
    when: date | None = None
    inner: Inner | None = None
    extra: dict[str, Any] = {}


@function_tool
class Echo:
    """Echo the validated request."""

    def apply(self, request: Request) -> dict[str, Any]:
        return request.model_dump(mode="json")


ROUTER = ToolRouter(builtins={})
ROUTER.register(Echo)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["1", "1.0", "red", "blue", "2026-12-06", "true", "", " 7 ", "1e3"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
keys = st.sampled_from(["a", "b", "name", "flag", "colour", "when", "inner", "extra", "n", "other"])
requests = st.dictionaries(keys, values | st.fixed_dictionaries({"n": values}, optional={"tags": values}), max_size=6)


def outcome(argument: Any) -> tuple[str, str]:
    try:
        return "ok", ROUTER.invoke("Echo", argument)
    except ToolError as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=400, deadline=None)
@given(requests)
def test_text_and_mapping_arguments_give_the_same_answer(request: dict[str, Any]) -> None:
    text = json.dumps(request)
    assert outcome(text) == outcome(request)  # a mapping always takes the general path


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40) | st.sampled_from(["", "  ", "[]", "null", '{"a": 1', '{"a": 1}{', '{"a":"\\ud800"}']))
def test_any_text_gives_the_general_paths_answer(text: str) -> None:
    from toolroute.router import parse_arguments

    try:
        general: tuple[str, str] = "ok", ROUTER.run(ROUTER.resolve("Echo"), parse_arguments(text)).text
    except ToolError as exc:
        general = type(exc).__name__, str(exc)
    assert outcome(text) == general


def test_deep_text_is_refused_by_depth_not_by_the_one_pass_path() -> None:
    deep = '{"a": 1, "extra": {"x": ' + "[" * 200 + "]" * 200 + "}}"
    kind, message = outcome(deep)
    assert kind == "ToolArgumentError" and "levels deep" in message


near_valid = st.fixed_dictionaries(
    {"a": st.integers(min_value=-(1 << 64), max_value=1 << 64) | st.sampled_from(["1", "2.0", 3.0, True, " 4"])},
    optional={
        "b": st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(["1.5", 2, "1e3", False]),
        "name": st.text(max_size=6) | st.sampled_from([1, None]),
        "flag": st.booleans() | st.sampled_from(["true", "yes", 0, 1, "off"]),
        "colour": st.sampled_from(["red", "blue", "green", "RED", 1]),
        "when": st.sampled_from(["2026-12-06", "2026-12-06T00:00:00", 0, 1700000000, "06/12/2026", None]),
        "inner": st.fixed_dictionaries(
            {"n": st.integers() | st.just("5")}, optional={"tags": st.lists(st.text(max_size=3))}
        ),
        "extra": st.dictionaries(st.text(max_size=3), scalars, max_size=3),
    },
)


@settings(max_examples=400, deadline=None)
@given(near_valid)
def test_near_valid_requests_give_the_same_answer(request: dict[str, Any]) -> None:
    text = json.dumps(request)
    assert outcome(text) == outcome(request)
