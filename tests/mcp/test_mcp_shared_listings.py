"""Users who register the same server share one copy of its listing (served mode holds hundreds:
the parsed tools, their models and their projected schemas were tens of KiB per user). Real
servers over stdio; sharing never crosses what each user may call or what a name routes to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_helpers import demo_stdio

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.mcp import McpGateway
from toolroute.mcp.loading import LISTINGS, SharedListings
from toolroute.naming import user_service_key


@pytest.fixture
def router(tmp_path: Path) -> Iterator[ToolRouter]:
    gateway = McpGateway()
    for user in ("alice", "bob"):
        gateway.add_user_server(user, "notes", demo_stdio("same"))  # the same server, each their own
    gateway.add_user_server("carol", "notes", demo_stdio("same", "extra_tool"))  # another listing
    with ToolRouter(gateway=gateway, context=BuiltInToolContext(tmp_path)) as r:
        yield r


def test_alike_listings_are_kept_once_and_route_per_user(router: ToolRouter) -> None:
    for user in ("alice", "bob", "carol"):
        router.get_user_mcp_tools(["notes"], user)
    gateway = router.gateway
    assert isinstance(gateway, McpGateway)
    alice, bob, carol = (gateway._services[user_service_key(u, "notes")] for u in ("alice", "bob", "carol"))
    assert alice.tools is bob.tools and alice.definitions is bob.definitions and alice.declared is bob.declared
    assert carol.definitions is not alice.definitions and "extra_tool" in carol.definitions
    # Shared projections, per-user names and routes: each call reaches its own user's server.
    assert router.invoke("user_alice_tool_echo", {"text": "a"}) == "same:a"
    assert router.invoke("user_bob_tool_echo", {"text": "b"}) == "same:b"
    alice_defs = router.get_user_mcp_tools(["notes"], "alice")
    names = [d["function"]["name"] for d in alice_defs]
    assert names and all("alice" in n and "bob" not in n for n in names)
    # A caller changing what it was given changes nobody else's.
    alice_defs[0]["function"]["name"] = "tampered"
    alice_defs[0]["function"]["description"] = "tampered"
    bob_defs = router.get_user_mcp_tools(["notes"], "bob")
    assert all("bob" in d["function"]["name"] for d in bob_defs)
    assert "tampered" not in str(bob_defs) and "tampered" not in str(router.get_user_mcp_tools(["notes"], "alice"))
    assert LISTINGS.size >= 2


def test_the_kept_listings_are_bounded() -> None:
    import mcp_types as types

    kept = SharedListings(size=2)
    listings = [[types.Tool(name=f"t{i}", input_schema={"type": "object"})] for i in range(3)]
    firsts = [kept.project(listing)[0] for listing in listings]
    assert [f is listing for f, listing in zip(firsts, listings, strict=True)] == [True] * 3
    again = [types.Tool(name="t2", input_schema={"type": "object"})]
    assert kept.project(again)[0] is listings[2]  # alike in every byte: the kept one
    assert kept.project([types.Tool(name="t0", input_schema={"type": "object"})])[0] is not listings[0]  # evicted
    assert len(kept._kept) == 2
