"""Local tools' return values become valid JSON text (issue 14 item 11)."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from toolroute import ToolRouter, function_tool
from toolroute.errors import ToolExecutionError
from toolroute.resulttext import UnserializableResult, _plain, result_text


class Mpf:
    """Shaped like mpmath's mpf: a number with `__float__`, compared by value."""

    def __init__(self, value: float, digits: str | None = None) -> None:
        self.value, self.digits = value, digits

    def __float__(self) -> float:
        return self.value

    def __eq__(self, other: object) -> bool:
        return self.digits is None and other == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return self.digits or str(self.value)

    def __repr__(self) -> str:
        return f"mpf('{self}')"


class Index:
    def __index__(self) -> int:
        return 7


@dataclasses.dataclass
class Point:
    x: float
    label: bytes


class Model(BaseModel):
    n: int
    tags: set[str]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Mpf(2.0), 2.0),
        (Mpf(1.0, digits="3.14159265358979323846264338327950288"), "3.14159265358979323846264338327950288"),
        (Index(), 7),
        (float("nan"), "NaN"),
        ([float("inf"), -math.inf], ["Infinity", "-Infinity"]),
        (b"caf\xc3\xa9", "café"),
        (b"\xff\x00", {"base64": "/wA="}),
        ({3, 1, 2}, [1, 2, 3]),
        ((1, "a"), [1, "a"]),
        (Decimal("2.50"), 2.5),
        (Decimal("10"), 10),
        (Decimal("0.1"), "0.1"),
        (Decimal("NaN"), "NaN"),
        (Fraction(1, 3), "1/3"),
        (Fraction(3, 4), 0.75),
        (uuid.UUID(int=5), "00000000-0000-0000-0000-000000000005"),
        (Point(math.nan, b"\xff"), {"x": "NaN", "label": {"base64": "/w=="}}),
        (Model(n=1, tags={"b", "a"}), {"n": 1, "tags": ["a", "b"]}),
        ({1: "a", None: 2, (1, 2): 3}, {"1": "a", "null": 2, "(1, 2)": 3}),
    ],
)
def test_values_json_cannot_say_directly(value: Any, expected: Any) -> None:
    assert json.loads(result_text(value)) == expected


def test_a_string_passes_unquoted() -> None:
    assert result_text("plain") == "plain"


def test_no_json_form_is_reported_clearly() -> None:
    with pytest.raises(UnserializableResult, match="holds a object, which has no JSON form"):
        result_text({"x": object()})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(UnserializableResult, match="a cycle"):
        result_text(cycle)


def test_through_the_router_mpmath_like_nan_and_bytes() -> None:
    @function_tool
    def numbers() -> list[Any]:
        """Odd numbers."""
        return [Mpf(2.0), math.nan, b"\xff"]

    @function_tool
    def opaque() -> object:
        """No JSON form."""
        return object()

    router = ToolRouter(builtins={})
    router.register(numbers)
    router.register(opaque)
    assert json.loads(router.invoke("numbers")) == [2.0, "NaN", {"base64": "/w=="}]
    with pytest.raises(ToolExecutionError, match="no JSON form"):
        router.invoke("opaque")


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary()
    | st.decimals()
    | st.fractions()
    | st.uuids()
    | st.builds(Mpf, st.floats())
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers() | st.text())
        | st.dictionaries(st.text() | st.integers() | st.floats(), inner)
    ),
    max_leaves=30,
)


def _no_constants(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


@given(_values)
def test_any_nested_value_gives_valid_json(value: Any) -> None:
    text = result_text(value)
    if not isinstance(value, str):
        json.loads(text, parse_constant=_no_constants)


@given(_values)
def test_the_text_reads_back_as_json_dumps_writes_it(value: Any) -> None:
    """pydantic-core writes the text (faster); it must say what `json.dumps` would."""
    text = result_text(value)
    if not isinstance(value, str):
        plain = json.loads(json.dumps(_plain(value, 0), ensure_ascii=False, allow_nan=False))
        assert json.loads(text) == plain


def test_a_lone_surrogate_is_written_as_json_dumps_writes_it() -> None:
    assert result_text(["\ud800", 1]) == '["\ud800",1]'


class Opaque:
    """No JSON form, no number protocol, unknown to pydantic."""


def test_a_declared_return_type_with_no_json_form_is_refused_before_any_call() -> None:
    from toolroute.errors import ToolRegistrationError

    calls: list[int] = []
    with pytest.raises(ToolRegistrationError, match="return type Opaque has no JSON form"):

        @function_tool  # refused where it is declared
        def opaque_tool() -> Opaque:
            """Would run, then fail."""
            calls.append(1)
            return Opaque()

    assert calls == []


def test_json_able_declared_return_types_register() -> None:
    @function_tool
    def many() -> list[Point]:
        """Generic: checked when it returns."""
        return [Point(1.0, b"x")]

    @function_tool
    def one() -> Point:
        """A dataclass."""
        return Point(1.0, b"x")

    @function_tool
    def uid() -> uuid.UUID:
        """Pydantic knows it."""
        return uuid.UUID(int=1)

    router = ToolRouter(builtins={})
    for tool in (many, one, uid):
        router.register(tool)
    assert json.loads(router.invoke("one")) == {"x": 1.0, "label": "x"}
