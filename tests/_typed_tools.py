"""Function tools with declared result types, served by the typed-result tests (and, for
comparison, the same functions registered with the SDK's own `MCPServer`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from toolroute import function_tool


class Forecast(BaseModel):
    city: str
    celsius: float
    tags: list[str] = []


class Totals(TypedDict):
    count: int
    total: float


def forecast(city: str) -> Forecast:
    """Tomorrow's weather in a city."""
    return Forecast(city=city, celsius=21.5, tags=["dry"])


def totals(values: list[float]) -> Totals:
    """How many values, and their sum."""
    return {"count": len(values), "total": sum(values)}


def plain(x: int) -> int:
    """A number: no declared shape."""
    return x * 2


def liar(x: int) -> Forecast:
    """Declares a Forecast and returns something else."""
    bad: Any = {"not": "a forecast"}
    return bad


TYPED = [forecast, totals, plain, liar]
for _fn in TYPED:
    function_tool(_fn)
