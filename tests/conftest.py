from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(workspace: Path) -> Iterator[BuiltInToolContext]:
    context = BuiltInToolContext(workspace)
    with builtin_tool_context(context):
        yield context


@pytest.fixture
def router(ctx: BuiltInToolContext) -> Iterator[ToolRouter]:
    r = ToolRouter()
    yield r
    r.close()
