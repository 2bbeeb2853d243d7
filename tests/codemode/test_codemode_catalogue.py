"""The program's view of its tools: Python names for any exposed name (unique identifiers, never
shadowing the module's own names), signatures from JSON schemas, a description bounded in size."""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolroute.codemode.catalogue import annotation, entries, python_name, signature
from toolroute.codemode.tool import describe
from toolroute.types import ToolKind


@dataclass(frozen=True)
class Listed:
    """A tool as far as the catalogue looks: its name and definition."""

    name: str
    parameters: dict[str, Any]
    description: str = "Does a thing. More words."
    kind: ToolKind = ToolKind.FUNCTION

    def definition(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@given(st.lists(st.text(min_size=1, max_size=20), max_size=30))
def test_every_name_gets_a_unique_identifier_that_is_no_keyword(names: list[str]) -> None:
    taken: set[str] = set()
    got = [python_name(n, taken) for n in names]
    assert len(set(got)) == len(got)
    for name in got:
        assert name.isidentifier() and not keyword.iskeyword(name)
        assert name not in {"tools", "call", "ToolError"}


def test_names_keep_their_shape_where_they_can() -> None:
    taken: set[str] = set()
    assert [
        python_name(n, taken) for n in ["read_file", "get-weather", "fs.read", "class", "get_weather", "9lives"]
    ] == [
        "read_file",
        "get_weather",
        "fs_read",
        "class_",
        "get_weather_2",
        "_9lives",
    ]


def test_signatures_read_like_python() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["a", "b"]},
            "path": {"type": "string"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "max-results": {"type": "integer"},
        },
        "required": ["path"],
    }
    assert signature("f", parameters) == (
        "f(*, path: str, mode: Literal['a', 'b'] = ..., limit: int | None = ..., tags: list[str] = ..., "
        "'max-results': int = ...)"
    )
    assert signature("g", {"type": "object", "properties": {}}) == "g()"
    assert annotation({"type": ["string", "null"]}) == "str | None"
    assert annotation({"enum": list(range(10)), "type": "integer"}) == "int"


def test_a_large_catalogue_is_listed_within_the_budget_and_names_the_rest() -> None:
    tools = [Listed(f"tool_{i}", {"type": "object", "properties": {"x": {"type": "string"}}}) for i in range(400)]
    catalogue = entries(tools)  # type: ignore[arg-type]
    text = describe(catalogue, 3000)
    shown = [line for line in text.splitlines() if line.startswith("tool_")]
    assert 0 < len(shown) < 400
    rest = text.rsplit("more; help(tools.NAME) for parameters): ", 1)[1].split(", ")
    assert len(shown) + len(rest) == 400
    assert len(text) < 3000 + 400 * 10  # the names past the budget, and nothing else
