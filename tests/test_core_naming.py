from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from toolroute import generate_api_function_name
from toolroute.naming import (
    encode_user_tool,
    generate_api_function_names,
    parse_user_service_key,
    sanitize_tool_name,
    user_service_key,
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
