"""A miss loads only the tool lists a name can resolve in (docs/mcp.md, "Lazy loading"): a
user-form name `user_{userId}_tool_{name}` only that user's own servers, never a global one; a
plain name the caller's and the global ones. Checked with real stdio servers, the global one
leaving a marker file when it is started at all."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _mcp_helpers import DEMO, demo_stdio

from toolroute import ToolRouter
from toolroute.errors import ToolNotFoundError
from toolroute.mcp import McpGateway


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[ToolRouter, Path]]:
    marker = tmp_path / "global-server-started"
    gateway = McpGateway()  # lazy: nothing connects until a name needs it
    script = f'touch "{marker}"; exec "{sys.executable}" "{DEMO}" --name g --extra shared_tool'
    gateway.add_server("g", {"command": "/bin/sh", "args": ["-c", script]})
    gateway.add_user_server("u1", "mine", demo_stdio("u1srv", "calc"))
    router = ToolRouter(gateway=gateway)
    yield router, marker
    router.close()


def test_a_user_form_name_never_starts_a_global_server(started: tuple[ToolRouter, Path]) -> None:
    router, marker = started
    assert router.invoke("user_u1_tool_calc", {}) == "u1srv:calc"
    assert router.invoke("user_u1_tool_calc", {}, user_id="u1") == "u1srv:calc"
    with pytest.raises(ToolNotFoundError):
        router.invoke("user_u1_tool_missing", {})
    with pytest.raises(ToolNotFoundError):
        anyio.run(router.ainvoke, "user_u1_tool_missing", {}, "u1")
    assert not marker.exists()
    # The marker works: a plain name may be a global tool, so the global list is loaded.
    assert router.invoke("shared_tool", {}) == "g:shared_tool"
    assert marker.exists()


def test_a_plain_name_with_a_user_loads_both_scopes(started: tuple[ToolRouter, Path]) -> None:
    router, marker = started
    assert anyio.run(router.ainvoke, "shared_tool", {}, "u1") == "g:shared_tool"
    assert marker.exists()
    assert router.invoke("calc", {}, user_id="u1") == "u1srv:calc"
