from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _bash_helpers import bash_router

from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder (its parent, tmp_path, is outside it)."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def bash(ws: Path) -> Iterator[ToolRouter]:
    """A router whose built-ins act in `ws`, closed (and its processes ended) after the test."""
    with bash_router(ws) as router:
        yield router


@pytest.fixture
def ctx(ws: Path) -> Iterator[BuiltInToolContext]:
    context = BuiltInToolContext(ws)
    with builtin_tool_context(context):
        yield context


@pytest.fixture
def router(ctx: BuiltInToolContext) -> Iterator[ToolRouter]:
    r = ToolRouter()
    yield r
    r.close()
