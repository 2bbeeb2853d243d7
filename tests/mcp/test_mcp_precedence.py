"""Spec 5's precedence at all five levels with colliding names, through real per-user MCP servers
over stdio and over HTTP: built-in, then the user's own remote tool (`user_{userId}_tool_{name}`),
then local MCP, function tool and the global gateway. And the exposure's identity rule: a name
an exposure lists runs exactly the tool it was listed for (docs/mcp.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_helpers import demo_stdio, http_server

from toolroute import BuiltInToolContext, ToolRouter, function_tool, mcp_service, mcp_tool
from toolroute.allowlist import ExposedTools
from toolroute.mcp import McpGateway

COLLIDING = ("read_file", "lsvc_lookup", "calc", "search")  # local MCP tools are `{service}_{tool}`


@mcp_service("lsvc", description="a local service")
class LocalService:
    @mcp_tool(description="local lookup")
    def lookup(self) -> str:
        return "local:lookup"


@function_tool(name="calc", description="a host function")
def calc() -> str:
    return "function:calc"


@pytest.fixture(params=["stdio", "http"])
def router(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolRouter]:
    (tmp_path / "f.txt").write_text("built-in answer\n")
    config = {"mcpServers": {"glob1": demo_stdio("glob1", "search")}}
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    gateway = McpGateway.from_file(tmp_path / "mcp.json", eager=True)
    router = ToolRouter(context=BuiltInToolContext(tmp_path), gateway=gateway)
    router.register(LocalService)
    router.register(calc)
    if request.param == "stdio":
        gateway.add_user_server("u1", "mine", demo_stdio("u1srv", *COLLIDING))
        yield router
    else:
        with http_server("u1srv", extra=COLLIDING) as server:
            gateway.add_user_server("u1", "mine", {"url": server.url})
            yield router
    router.close()


def test_with_the_users_id_each_level_wins_in_the_specs_order(router: ToolRouter) -> None:
    # 1. built-in first, even where the user's server has the same name
    assert "built-in answer" in router.invoke("read_file", {"path": "f.txt"}, user_id="u1")
    # 2. the user's own tool before local MCP, function tools and the global gateway
    assert router.invoke("lsvc_lookup", {}, user_id="u1") == "u1srv:lsvc_lookup"
    assert router.invoke("calc", {}, user_id="u1") == "u1srv:calc"
    assert router.invoke("search", {}, user_id="u1") == "u1srv:search"


def test_without_the_users_id_the_shared_levels_answer(router: ToolRouter) -> None:
    assert router.invoke("lsvc_lookup", {}) == "local:lookup"  # 3. local MCP
    assert router.invoke("calc", {}) == "function:calc"  # 4. function tool
    # 5. the global gateway: its `search` is free, so it keeps its own name
    assert router.invoke("search", {}) == "glob1:search"
    for name in ("lsvc_lookup", "calc", "search"):
        assert router.invoke(name, {}, user_id="u2") == router.invoke(name, {})  # another user: shared


def test_the_users_tools_are_exposed_under_the_specs_names(router: ToolRouter) -> None:
    listed = [t["function"]["name"] for t in router.get_all_tools([], ["mine"], user_id="u1")]
    for name in COLLIDING:
        assert f"user_u1_tool_{name}" in listed
        assert router.invoke(f"user_u1_tool_{name}", {}) == f"u1srv:{name}"
    assert not any(n in listed for n in COLLIDING)  # never a bare name for a user's tool


def test_an_exposed_name_runs_the_tool_it_was_listed_for(router: ToolRouter) -> None:
    # The exposure lists the host's `calc` and the user's own tools: `calc` runs the host's
    # (identity rule), while invoke("calc", user_id=...) routes by precedence to the user's.
    exposed = ExposedTools(router, ["calc"], ["lsvc", "mine"], user_id="u1")
    assert exposed.execute("calc").text == "function:calc"
    assert exposed.execute("lsvc_lookup").text == "local:lookup"
    assert exposed.execute("user_u1_tool_calc").text == "u1srv:calc"
    assert router.invoke("calc", {}, user_id="u1") == "u1srv:calc"
