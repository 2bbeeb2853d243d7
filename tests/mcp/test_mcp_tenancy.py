"""Allowlists, per-user isolation (spec 5.1), collisions and reserved names, through the router."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _mcp_helpers import demo_stdio

from toolroute import ToolRouter
from toolroute.errors import ToolArgumentError, ToolNotFoundError
from toolroute.mcp import McpGateway
from toolroute.naming import has_user_form


@pytest.fixture(scope="module")
def gateway() -> Iterator[McpGateway]:
    config = {
        "mcpServers": {
            "github": demo_stdio("github", "search", "create_issue"),
            "jira": demo_stdio("jira", "search", "user_7_tool_sneaky"),
            "off": {**demo_stdio("off", "hidden_tool"), "disabled": True},
        }
    }
    with McpGateway(config, eager=True) as gw:
        gw.add_user_server("alice", "notes", demo_stdio("alice-notes", "secret"))
        gw.add_user_server("alice", "mail", demo_stdio("alice-mail", "secret", "send"))
        gw.add_user_server("bob", "notes", demo_stdio("bob-notes"))
        yield gw


@pytest.fixture(scope="module")
def router(gateway: McpGateway) -> ToolRouter:
    return ToolRouter(gateway=gateway)


def _names(tools: list[dict]) -> set[str]:
    return {t["function"]["name"] for t in tools}


# ---- allowlists (spec 4, 13.4) --------------------------------------------------------------


def test_only_allowlisted_services_are_exposed(gateway: McpGateway, router: ToolRouter) -> None:
    github = _names(router.get_all_tools(mcp_server_ids=["github"]))
    assert "create_issue" in github and "github_search" in github
    assert not any(n.startswith("jira") for n in github)
    assert _names(router.get_all_tools(mcp_server_ids=[])) == set()
    assert _names(gateway.get_global_mcp_tools(["jira"])).isdisjoint(github)


def test_unknown_or_disabled_services_are_refused_and_never_callable(gateway: McpGateway, router: ToolRouter) -> None:
    with pytest.raises(ToolNotFoundError, match="no such global MCP service"):
        gateway.get_global_mcp_tools(["off"])
    assert not gateway.has_service("off")
    with pytest.raises(ToolNotFoundError):
        router.invoke("hidden_tool")


def test_user_tools_are_not_reachable_through_the_global_path(gateway: McpGateway, router: ToolRouter) -> None:
    with pytest.raises(ToolNotFoundError):
        gateway.call_tool("secret")
    with pytest.raises(ToolNotFoundError):
        router.invoke("secret")  # no user id, no user-form name: global only
    with pytest.raises(ToolNotFoundError, match="no such global MCP service"):
        gateway.get_global_mcp_tools(["notes"])


# ---- collisions and reserved names ---------------------------------------------------------


def test_collision_is_reported_and_both_tools_stay_reachable(gateway: McpGateway, router: ToolRouter) -> None:
    # AI4J lets the last writer win; here neither server shadows the other.
    assert gateway.collisions["search"] == ["github", "jira"]
    assert router.invoke("github_search") == "github:search"
    assert router.invoke("jira_search") == "jira:search"
    with pytest.raises(ToolNotFoundError):
        router.invoke("search")
    with pytest.raises(ToolNotFoundError) as info:
        gateway.call_tool("search")
    assert set(info.value.suggestions) == {"github_search", "jira_search"}


def test_a_collision_is_logged_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    config = {"a": demo_stdio("a"), "b": demo_stdio("b")}
    with caplog.at_level("WARNING", logger="toolroute.mcp"), McpGateway(config, eager=True) as gw:
        assert gw.collisions["add"] == ["a", "b"]
    assert any("'add' is offered by several servers (a, b)" in r.getMessage() for r in caplog.records)


def test_a_global_tool_in_user_form_is_renamed_not_routed_to_a_user(gateway: McpGateway, router: ToolRouter) -> None:
    exposed = gateway.renamed["jira/user_7_tool_sneaky"]
    assert not has_user_form(exposed)
    assert router.invoke(exposed) == "jira:user_7_tool_sneaky"
    with pytest.raises(ToolNotFoundError):
        router.invoke("user_7_tool_sneaky")


# ---- per-user servers (spec 5.1) ----------------------------------------------------------


def test_user_tools_use_the_user_form_and_list_only_their_own(gateway: McpGateway, router: ToolRouter) -> None:
    alice = _names(router.get_user_mcp_tools(["notes", "mail"], "alice"))
    assert alice and all(n.startswith(("user_alice_tool_", "user_-alice_tool_")) for n in alice)
    assert "user_alice_tool_send" in alice  # the readable form whenever it fits
    assert {"user_alice_tool_send", "user_alice_tool_notes_secret", "user_alice_tool_mail_secret"} <= alice
    assert gateway.user_collisions("alice")["secret"] == ["mail", "notes"]
    bob = _names(router.get_user_mcp_tools(["notes"], "bob"))
    assert bob and all(n.startswith(("user_bob_tool_", "user_-bob_tool_")) for n in bob)
    assert _names(router.get_all_tools(mcp_server_ids=["user_alice_service_notes"])) <= alice


def test_a_removed_user_leaves_nothing_in_the_gateway() -> None:
    """A served gateway meets thousands of users: one removed is forgotten, its collisions too,
    while another user's stay."""
    with McpGateway({}) as gw:
        for user in ("carol", "dave"):
            gw.add_user_server(user, "notes", demo_stdio(f"{user}-notes", "secret"))
            gw.add_user_server(user, "mail", demo_stdio(f"{user}-mail", "secret"))
            gw.get_user_mcp_tools(["notes", "mail"], user)
            assert gw.user_collisions(user)["secret"] == ["mail", "notes"]
        gw.remove_user("carol")
        assert gw.user_ids() == ["dave"]
        assert gw.user_collisions("carol") == {}
        assert "carol" not in gw._publisher.user_collisions  # not even an empty entry
        assert not [t for t in gw._publisher.live.values() if t.user_id == "carol"]
        assert gw.user_collisions("dave")["secret"] == ["mail", "notes"]
        # Nor the names the route table gave carol's tools: back with one server, her tool
        # is planned afresh and takes the plain name (kept claims would have kept the suffix).
        before = _names(gw.get_user_mcp_tools(["notes", "mail"], "dave"))
        gw.add_user_server("carol", "notes", demo_stdio("carol-notes", "secret"))
        names = _names(gw.get_user_mcp_tools(["notes"], "carol"))
        assert "user_carol_tool_secret" in names, names
        assert _names(gw.get_user_mcp_tools(["notes", "mail"], "dave")) == before
        assert "user_dave_tool_secret" not in before  # dave's collision still suffixes both


def test_user_a_can_neither_list_nor_call_user_bs_tools(gateway: McpGateway, router: ToolRouter) -> None:
    router.get_user_mcp_tools(["notes", "mail"], "alice")
    with pytest.raises(ToolArgumentError, match="another user"):
        router.get_all_tools(mcp_server_ids=["user_alice_service_notes"], user_id="bob")
    with pytest.raises(ToolNotFoundError):
        gateway.get_user_mcp_tools(["user_alice_service_notes"], "bob")
    with pytest.raises(ToolNotFoundError):
        gateway.get_user_mcp_tools(["mail"], "bob")
    with pytest.raises(ToolNotFoundError):
        router.invoke("user_alice_tool_send", {}, user_id="bob")
    with pytest.raises(ToolNotFoundError):
        gateway.call_user_tool("bob", "send")
    with pytest.raises(ToolNotFoundError):
        gateway.call_user_tool("bob", "user_alice_tool_send")


def test_user_calls_by_encoded_name_or_explicit_user_id(gateway: McpGateway, router: ToolRouter) -> None:
    router.get_user_mcp_tools(["notes", "mail"], "alice")
    router.get_user_mcp_tools(["notes"], "bob")
    assert router.invoke("user_alice_tool_send") == "alice-mail:send"
    assert router.invoke("send", {}, user_id="alice") == "alice-mail:send"
    assert router.invoke("user_bob_tool_echo", {"text": "hi"}) == "bob-notes:hi"
    assert gateway.call_user_tool("alice", "notes_secret").text == "alice-notes:secret"
    assert router.invoke("echo", {"text": "x"}, user_id="bob") == "bob-notes:x"  # user before global


def test_a_user_tool_is_found_by_the_route_table_and_an_ambiguous_server_name_is_refused(
    gateway: McpGateway, router: ToolRouter
) -> None:
    """`call_user_tool` asks the route table: an exposed name or its key reaches the tool it
    names; the server's own tool name only when one of the user's tools has it. Both of alice's
    servers call a tool `secret`: that name picks neither (it once picked whichever came first)."""
    router.get_user_mcp_tools(["notes", "mail"], "alice")
    assert gateway.call_user_tool("alice", "mail_secret").text == "alice-mail:secret"
    assert gateway.call_user_tool("alice", "user_alice_tool_notes_secret").text == "alice-notes:secret"
    assert gateway.call_user_tool("alice", "send").text == "alice-mail:send"
    with pytest.raises(ToolNotFoundError, match="several") as info:
        gateway.call_user_tool("alice", "secret")
    assert set(info.value.suggestions) == {"user_alice_tool_mail_secret", "user_alice_tool_notes_secret"}
    send = gateway.target("user_alice_tool_send", "alice")
    assert send is not None and gateway.target("user_alice_tool_send", "alice") is send
    assert gateway.target("user_alice_tool_send") is None  # a user's tool is not a global one
    assert gateway.target("user_alice_tool_send", "bob") is None
    assert gateway.target("create_issue", "alice") is None and gateway.target("create_issue") is not None


def test_each_user_gets_their_own_server_process(gateway: McpGateway) -> None:
    alice = gateway.call_user_tool("alice", "user_alice_tool_notes_pid").text
    bob = gateway.call_user_tool("bob", "pid").text
    assert alice != bob


def test_user_form_name_never_falls_back_to_global(gateway: McpGateway, router: ToolRouter) -> None:
    router.get_user_mcp_tools(["notes"], "bob")
    assert router.invoke("create_issue") == "github:create_issue"  # a global tool
    with pytest.raises(ToolNotFoundError):
        router.invoke("user_bob_tool_create_issue")
    with pytest.raises(ToolNotFoundError):
        gateway.call_user_tool("bob", "create_issue")


def test_global_ids_asked_for_a_user_fall_back_to_the_shared_server(gateway: McpGateway) -> None:
    names = _names(gateway.get_user_mcp_tools(["github"], "bob"))
    assert "create_issue" in names  # a shared server: same names for everyone


def test_lazy_user_servers_load_on_a_miss_with_the_user_id() -> None:
    with McpGateway() as gw:
        gw.add_user_server("carol", "notes", demo_stdio("carol-notes"))
        router = ToolRouter(gateway=gw)
        assert router.invoke("echo", {"text": "lazy"}, user_id="carol") == "carol-notes:lazy"
        with pytest.raises(ToolNotFoundError):
            router.invoke("echo", {"text": "lazy"}, user_id="dave")
