from __future__ import annotations

from typing import Annotated

from pydantic import Field

from toolroute import function_tool


@function_tool
def add(a: Annotated[int, Field(description="first addend")], b: int = 2) -> int:
    """Add two integers."""
    return a + b


@function_tool(name="echo_text")
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def not_a_tool() -> None:
    """Plain helpers are never registered."""
