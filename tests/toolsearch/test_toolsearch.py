"""Tool search (issue 46): deferred exposure behind a search tool, over the request's own
catalogue. What a request defers stays callable and unlisted; a search finds only what that
request (and that user) may call, checked as a property over random allowlists with two users'
real MCP servers; the index is shared by requests naming the same tools and by no others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_helpers import demo_stdio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolroute import (
    BuiltInToolContext,
    ToolArgumentError,
    ToolLimits,
    ToolRouter,
    function_tool,
    mcp_service,
    mcp_tool,
)
from toolroute.exposure import Exposure
from toolroute.mcp import McpGateway
from toolroute.router import CATALOGUES

TOPICS = ["weather", "email", "invoice", "calendar", "flight", "hotel", "stock", "recipe", "music", "traffic"]


def topic_tool(topic: str) -> Any:
    @function_tool(name=f"{topic}_lookup", description=f"Look up {topic} information by a query.")
    def lookup(query: str) -> str:
        return f"{topic}:{query}"

    return lookup


@mcp_service("crm", description="customer records")
class Crm:
    @mcp_tool(description="Find a customer by their email address")
    def find_customer(self, email: str) -> str:
        return f"customer {email}"


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolRouter]:
    root = tmp_path_factory.mktemp("toolsearch")
    (root / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    gateway = McpGateway.from_file(root / "mcp.json")
    # two users, each with a server offering the same tools: only names tell them apart
    gateway.add_user_server("u1", "mine", demo_stdio("u1srv", "lookup"))
    gateway.add_user_server("u2", "mine", demo_stdio("u2srv", "lookup"))
    with ToolRouter(context=BuiltInToolContext(root), gateway=gateway) as r:
        for topic in TOPICS:
            r.register(topic_tool(topic))
        r.register(Crm)
        yield r


def search(router: ToolRouter, exposure: Exposure, query: str, **extra: Any) -> list[str]:
    found: list[str] = router.run(exposure.get("search_tools"), {"query": query, **extra}).trace["found"]  # type: ignore[arg-type]
    return found


def test_deferred_tools_are_left_out_found_by_search_and_callable(router: ToolRouter) -> None:
    exposure = router.expose(["read_file", "weather_lookup", "email_lookup"], ["crm"], deferred=["email_lookup", "crm"])
    listed = [d["function"]["name"] for d in exposure.definitions]
    assert listed == ["read_file", "weather_lookup", "search_tools"]
    assert exposure.deferred == {"email_lookup", "crm_find_customer"}
    assert search(router, exposure, "find the customer with this email address")[0] == "crm_find_customer"
    output = router.run(exposure.get("search_tools"), {"query": "customer email"})  # type: ignore[arg-type]
    shown = json.loads(output.text)["tools"]
    assert {t["name"] for t in shown} == {"crm_find_customer", "email_lookup"}
    assert all("parameters" in t and "description" in t for t in shown)
    # what a search shows is callable, and nothing more became callable
    assert router.run(exposure.get("crm_find_customer"), {"email": "a@b"}).text == "customer a@b"  # type: ignore[arg-type]
    assert exposure.get("invoice_lookup") is None
    assert search(router, exposure, "weather") == []  # listed tools are not searched: they are shown


def test_deferring_everything_keeps_the_built_ins_listed(router: ToolRouter) -> None:
    exposure = router.expose(["read_file", "grep", *(f"{t}_lookup" for t in TOPICS)], deferred=True)
    assert [d["function"]["name"] for d in exposure.definitions] == ["read_file", "grep", "search_tools"]
    assert len(exposure.deferred) == len(TOPICS)
    assert search(router, exposure, "book a flight", limit=1) == ["flight_lookup"]
    assert search(router, exposure, "^(stock|recipe)_", mode="regex") == ["stock_lookup", "recipe_lookup"]


def test_a_deferral_naming_nothing_of_the_request_is_refused(router: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match="deferred names no tool or server of this request: invoice_lookup"):
        router.expose(["weather_lookup"], deferred=["invoice_lookup"])


@pytest.mark.parametrize("pattern", ["(unclosed", "a" * 201])
def test_a_bad_regex_is_the_models_to_fix(router: ToolRouter, pattern: str) -> None:
    exposure = router.expose(["weather_lookup", "email_lookup"], deferred=True)
    with pytest.raises(ToolArgumentError):
        search(router, exposure, pattern, mode="regex")


def test_requests_naming_the_same_tools_share_one_index(router: ToolRouter) -> None:
    first = router.expose(["weather_lookup", "email_lookup"], deferred=True)
    again = router.expose(["weather_lookup", "email_lookup"], deferred=True)
    other = router.expose(["weather_lookup", "invoice_lookup"], deferred=True)

    def catalogue(e: Exposure) -> Any:
        return e.get("search_tools").handler.args[0]  # type: ignore[union-attr]

    assert catalogue(first) is catalogue(again)
    assert catalogue(first) is not catalogue(other)
    assert len(router.resource(CATALOGUES, dict)._entries) >= 2  # type: ignore[attr-defined]


def test_the_code_tool_lists_the_listed_and_points_at_search_for_the_rest(router: ToolRouter) -> None:
    exposure = router.expose(["weather_lookup", "email_lookup", "run_code"], deferred=["email_lookup"])
    description = exposure.tools["run_code"].definition()["function"]["description"]
    assert "weather_lookup(*, query: str)" in description
    assert "email_lookup(" not in description
    assert "1 more tools are callable: find them with search_tools" in description


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    user=st.sampled_from(["u1", "u2"]),
    functions=st.lists(st.sampled_from(TOPICS), unique=True, max_size=6),
    query=st.sampled_from([*TOPICS, "lookup", "key", "value", "customer", "add numbers", "echo text"]),
)
def test_a_search_finds_only_what_this_request_and_user_may_call(
    router: ToolRouter, user: str, functions: list[str], query: str
) -> None:
    names = [f"{t}_lookup" for t in functions]
    exposure = router.expose(names, user_id=user, user_servers=["mine"], deferred=True)
    other = "u2" if user == "u1" else "u1"
    assert any(name.startswith(f"user_{user}_tool_") for name in exposure.deferred)  # the user's own are in
    found = search(router, exposure, query, limit=50) + search(router, exposure, ".", mode="regex", limit=50)
    assert set(found) <= set(exposure.deferred)
    assert not any(f"user_{other}_" in name for name in found)
    assert all(exposure.get(name) is not None for name in found)


def test_results_past_the_output_cap_drop_whole_tools_and_say_so(tmp_path: Path) -> None:

    context = BuiltInToolContext(tmp_path, limits=ToolLimits(max_output_chars=600))
    with ToolRouter(context=context) as small:
        for topic in TOPICS:
            small.register(topic_tool(topic))
        exposure = small.expose([f"{t}_lookup" for t in TOPICS], deferred=True)
        output = small.run(exposure.get("search_tools"), {"query": "look up information", "limit": 10})  # type: ignore[arg-type]
    shown = json.loads(output.text)  # still whole JSON: no cut through a schema
    assert len(output.text) <= 600
    assert 0 < len(shown["tools"]) < 10 and "more matched but do not fit" in shown["note"]
    assert output.trace["found"] == [t["name"] for t in shown["tools"]]


def test_deferring_a_named_server_out_of_reach_is_no_error(router: ToolRouter) -> None:
    """A user's own server that cannot be reached is left out of the exposure (not the whole
    exposure with it); deferring it must not turn that into an error either."""
    gateway = router.gateway
    assert isinstance(gateway, McpGateway)
    gateway.add_user_server("u1", "gone", {"command": "/nonexistent/server"})
    exposure = router.expose(["weather_lookup"], user_id="u1", user_servers=["gone"], deferred=["gone"])
    assert [d["function"]["name"] for d in exposure.definitions] == ["weather_lookup"]
    assert exposure.deferred == frozenset()
