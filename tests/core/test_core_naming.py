from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolroute import ToolArgumentError, generate_api_function_name
from toolroute._core import RouteTable, ToolKind
from toolroute.naming import (
    decode_user_tool,
    encode_user_tool,
    generate_api_function_names,
    has_user_form,
    mcp_tool_candidates,
    parse_user_service_key,
    sanitize_tool_name,
    user_service_candidates,
    user_service_key,
    user_tool_owners,
)

NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_spec_rules_letters_digits_underscore_hyphen():
    assert generate_api_function_name("github", "create.issue") == "github_create_issue"
    assert generate_api_function_name("a  b", "c") == "a_b_c"
    assert generate_api_function_name("__x__", "__y__") == "x_y"


def test_prefix_when_not_starting_with_a_letter():
    assert generate_api_function_name("123svc", "x") == "tool_123svc_x"
    assert sanitize_tool_name("") == "tool"


def test_prefix_then_cap_never_exceeds_64():
    # AI4J cut to 64 then prefixed, reaching 69 characters.
    name = generate_api_function_name("1" * 70, "t")
    assert len(name) == 64 and name.startswith("tool_1")


def test_cut_names_keep_a_stable_distinguishing_hash():
    a = generate_api_function_name("s" * 80, "alpha")
    b = generate_api_function_name("s" * 80, "beta")
    assert a != b
    assert a == generate_api_function_name("s" * 80, "alpha")


@given(st.text(max_size=200), st.text(max_size=200))
def test_every_generated_name_is_legal(service: str, tool: str):
    assert NAME_RULE.match(generate_api_function_name(service, tool))


@given(st.lists(st.tuples(st.text(max_size=40), st.text(max_size=40)), max_size=50))
def test_batch_equals_single(pairs):
    assert generate_api_function_names(pairs) == [generate_api_function_name(s, t) for s, t in pairs]


def test_user_keys():
    assert encode_user_tool("123", "create_issue") == "user_123_tool_create_issue"
    assert user_service_key("u1", "github") == "user_u1_service_github"
    assert parse_user_service_key("user_u1_service_github") == ("u1", "github")
    assert parse_user_service_key("github") is None


# ---- the user-form grammar, property-based over the whole allowed alphabet -------------------

USER_IDS = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
KEYS = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
# ids built from the grammar's own pieces, where an ambiguity would hide
TRICKY = st.lists(
    st.sampled_from(["a", "_tool_", "_tool", "tool_", "-", "_", "_service_", "1"]), min_size=1, max_size=8
).map("".join)


@settings(max_examples=400)
@given(
    a=st.tuples(st.one_of(USER_IDS, TRICKY.filter(lambda s: len(s) <= 64)), st.one_of(KEYS, TRICKY)),
    b=st.tuples(st.one_of(USER_IDS, TRICKY.filter(lambda s: len(s) <= 64)), st.one_of(KEYS, TRICKY)),
)
def test_user_form_names_are_one_to_one(a: tuple[str, str], b: tuple[str, str]):
    name_a, name_b = encode_user_tool(*a), encode_user_tool(*b)
    for name in (name_a, name_b):
        assert NAME_RULE.match(name) and has_user_form(name)
    assert (name_a == name_b) == (a == b)
    for pair, name in ((a, name_a), (b, name_b)):
        decoded = decode_user_tool(name)
        assert decoded is None or decoded == pair  # readable names decode to exactly their pair
        assert pair[0] in user_tool_owners(name, [pair[0]])


def test_the_readable_form_is_kept_for_common_ids():
    assert encode_user_tool("123", "create_issue") == "user_123_tool_create_issue"
    assert decode_user_tool("user_123_tool_create_issue") == ("123", "create_issue")
    uuid = "0b7e2c1a-5d3f-4e8b-9a6c-1f2e3d4c5b6a"
    assert encode_user_tool(uuid, "create_pr") == f"user_{uuid}_tool_create_pr"
    # the two users of the repro 3 no longer share a name
    assert encode_user_tool("a_tool_b", "c") != encode_user_tool("a", "b_tool_c")
    # 64-character ids (a SHA-256 hex tenant id) keep the user form and fit
    name = encode_user_tool("f" * 64, "create_issue")
    assert len(name) <= 64 and has_user_form(name) and decode_user_tool(name) is None


def test_user_service_grammar():
    assert user_service_key("u1", "github") == "user_u1_service_github"
    key = user_service_key("a_service_b", "c")
    assert user_service_candidates(key) == [("a", "b_service_c"), ("a_service_b", "c")]
    assert parse_user_service_key(key, "a_service_b") == ("a_service_b", "c")
    with pytest.raises(ToolArgumentError, match="several"):
        parse_user_service_key(key)


# ---- the naming plan: stable, order-independent, host names reserved -----------------------

SERVER_IDS = st.sampled_from(["g1", "g2", "g3", "a", "a_b"])
TOOLS = st.sampled_from(["search", "b_c", "c", "bash", "fetch", "a.b", "a_b", "user_1_tool_x"])
SERVERS = st.dictionaries(SERVER_IDS, st.lists(TOOLS, min_size=1, max_size=4, unique=True), min_size=1, max_size=5)


def _items(servers: dict[str, list[str]], only: list[str]) -> list[tuple[str, list[str]]]:
    return [(f"{s}\0{t}", mcp_tool_candidates(s, t)) for s in only for t in servers[s]]


def _table() -> RouteTable:
    table = RouteTable()
    table.insert(ToolKind.BUILTIN, "bash", object())
    return table


@settings(max_examples=150, deadline=None)
@given(servers=SERVERS, data=st.data())
def test_exposed_names_never_change_under_any_load_order(servers: dict[str, list[str]], data: st.DataObject):
    order = data.draw(st.permutations(sorted(servers)))
    table = _table()
    given_names: dict[str, str] = {}
    for sid in order:  # one server per batch, as lazy loading does
        items = _items(servers, [sid])
        for (ident, _), name in zip(items, table.plan(ToolKind.GLOBAL_MCP, items), strict=True):
            assert name is not None and NAME_RULE.match(name) and name != "bash" and not has_user_form(name)
            given_names[ident] = name
        # every name given so far still belongs to the same tool, whatever loaded since
        everything = _items(servers, [s for s in order if s in {i.split("\0")[0] for i in given_names}])
        again = dict(zip([i for i, _ in everything], table.plan(ToolKind.GLOBAL_MCP, everything), strict=True))
        assert again == {i: given_names[i] for i in again}
    assert len(set(given_names.values())) == len(given_names)


@settings(max_examples=150, deadline=None)
@given(servers=SERVERS, data=st.data())
def test_one_batch_is_named_the_same_in_any_order(servers: dict[str, list[str]], data: st.DataObject):
    first = sorted(servers)
    other = data.draw(st.permutations(first))
    results = []
    for order in (first, other):
        items = _items(servers, order)
        items = data.draw(st.permutations(items)) if order is other else items
        names = _table().plan(ToolKind.GLOBAL_MCP, items)
        results.append(dict(zip([i for i, _ in items], names, strict=True)))
    assert results[0] == results[1]
    assert len(set(results[0].values())) == len(results[0])


@settings(max_examples=100, deadline=None)
@given(
    tenants=st.dictionaries(
        st.one_of(USER_IDS, TRICKY.filter(lambda s: len(s) <= 64)),
        st.lists(st.one_of(TOOLS, KEYS), min_size=1, max_size=4, unique=True),
        min_size=1,
        max_size=4,
    )
)
def test_user_tools_route_to_exactly_their_own_server(tenants: dict[str, list[str]]):
    table = _table()
    table.insert(ToolKind.GLOBAL_MCP, "search", "shared")
    owners: dict[str, tuple[str, str]] = {}
    for uid, tools in tenants.items():
        items = [(f"s\0{t}", mcp_tool_candidates("s", t)) for t in tools]
        for tool, key in zip(tools, table.plan_user(uid, items), strict=True):
            assert key is not None
            name = table.insert_user(uid, key, (uid, tool))
            assert name not in owners
            owners[name] = (uid, tool)
    for name, (uid, tool) in owners.items():
        assert table.resolve(name) == (ToolKind.USER_MCP, (uid, tool))
        assert table.resolve(name, uid) == (ToolKind.USER_MCP, (uid, tool))
        for other in tenants:
            if other != uid:  # another tenant, by this name: nothing, never a shared tool
                assert table.resolve(name, other) is None
