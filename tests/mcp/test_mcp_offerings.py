"""The naming and routing rules of what servers offer besides tools (issue 43, `offerings.py`):
a prompt name several servers offer is qualified for each and never reaches another server's
prompt; a URI is read from the server that lists it, else the first whose template matches;
instructions pass whole from one server; controls are made visible, names and URIs kept."""

from __future__ import annotations

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from toolroute.mcp.offerings import (
    first_by_key,
    joined_instructions,
    prompt_names,
    resource_owner,
    template_pattern,
    visible,
)


def _prompts(*names: str) -> list[types.Prompt]:
    return [types.Prompt(name=n) for n in names]


def test_a_shared_prompt_name_is_qualified_for_each_server_and_a_lone_one_kept() -> None:
    offered = prompt_names([("a", _prompts("fetch", "only_a")), ("b", _prompts("fetch"))])
    assert {k: (o.service_id, o.own_name) for k, o in offered.items()} == {
        "a_fetch": ("a", "fetch"),
        "only_a": ("a", "only_a"),
        "b_fetch": ("b", "fetch"),
    }


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.lists(st.sampled_from(["x", "y", "a_x", "b_y"]), max_size=4)), max_size=4
    )
)
def test_every_exposed_prompt_name_reaches_one_prompt_of_the_server_that_offers_it(
    listings: list[tuple[str, list[str]]],
) -> None:
    servers = {sid: names for sid, names in dict(listings).items()}  # one listing per server
    offered = prompt_names([(sid, _prompts(*names)) for sid, names in servers.items()])
    for exposed, o in offered.items():
        assert o.own_name in servers[o.service_id]  # a real prompt of that very server
        assert exposed in (o.own_name, f"{o.service_id}_{o.own_name}")
    # Each (server, prompt) is exposed at most once.
    pairs = [(o.service_id, o.own_name) for o in offered.values()]
    assert len(pairs) == len(set(pairs))


def test_a_uri_is_read_from_its_lister_then_from_a_matching_template() -> None:
    resources = first_by_key(
        [
            ("a", [types.Resource(uri="notes://index", name="i")]),
            ("b", [types.Resource(uri="notes://index", name="j")]),
        ],
        "uri",
    )
    templates = first_by_key(
        [
            ("b", [types.ResourceTemplate(uri_template="notes://{topic}", name="t")]),
            ("c", [types.ResourceTemplate(uri_template="file:///{+path}", name="f")]),
        ],
        "uri_template",
    )
    assert resource_owner("notes://index", resources, templates) == "a"  # the first lister
    assert resource_owner("notes://gamma", resources, templates) == "b"
    assert resource_owner("file:///x/y.txt", resources, templates) == "c"
    assert resource_owner("notes://a/b", resources, templates) is None  # one segment only
    assert resource_owner("other://x", resources, templates) is None


def test_template_patterns() -> None:
    assert template_pattern("db://{table}/rows{?limit,offset}").fullmatch("db://t/rows?limit=3&offset=1")
    assert template_pattern("db://{table}/rows{?limit,offset}").fullmatch("db://t/rows")
    assert not template_pattern("db://{table}").fullmatch("db://a/b")
    assert template_pattern("x://literal(").fullmatch("x://literal(")  # literals are escaped


def test_instructions_pass_whole_from_one_server_and_joined_under_ids_from_several() -> None:
    assert joined_instructions([("a", "Use me.\nTwice."), ("b", "")]) == "Use me.\nTwice."
    assert joined_instructions([("a", "A"), ("b", "B")]) == "[a]\nA\n\n[b]\nB"
    assert joined_instructions([("a", ""), ("b", "")]) is None
    assert joined_instructions([("a", "bell\x07")]) == "bell\\x07"


def test_visible_keeps_names_and_uris_and_makes_controls_visible() -> None:
    prompt = types.Prompt(name="p\x1b", description="hid\u202eden")
    shown = visible(prompt)
    assert shown.name == "p\x1b" and shown.description == "hid\\u202eden"
    clean = types.Resource(uri="notes://x", name="n", description="plain")
    assert visible(clean) is clean  # nothing to change: the same object
