"""MCP results -> the model's text: capped while converting, control characters made visible."""

from __future__ import annotations

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from toolroute.mcp.results import content_text, to_output
from toolroute.textsafety import neutralize


def _texts(*parts: str) -> list[types.TextContent]:
    return [types.TextContent(text=p) for p in parts]


def _split(text: str) -> tuple[str, str | None]:
    """(body, notice): the notice is the last line when the text was cut."""
    body, _, last = text.rpartition("\n")
    return (body, last) if last.startswith("[... ") and last.endswith(" ...]") else (text, None)


def test_under_the_cap_nothing_is_added() -> None:
    assert content_text(_texts("one", "two"), 100) == "one\ntwo"


def test_blocks_are_cut_in_order_and_the_notice_counts_what_is_missing() -> None:
    text = content_text(_texts("a" * 6, "b" * 6), 10)
    body, notice = _split(text)
    assert body == "aaaaaa\nbbb"
    assert notice == (
        "[... 3 characters omitted of 13; this gateway passes at most 10 characters of one MCP result; "
        "ask the tool for less (a narrower query, a page or a range) to see the rest ...]"
    )


def test_escapes_count_against_the_cap_and_are_never_split() -> None:
    body, notice = _split(content_text(_texts("ab\x1b\x1b\x1bcd"), 9))
    assert body == "ab\\x1b"  # the next escape would pass 9 characters
    assert notice is not None and notice.startswith("[... 4 characters omitted of 7;")


def test_a_crlf_is_not_split_into_a_lone_cr() -> None:
    body, _ = _split(content_text(_texts("abc\r\ndef"), 4))
    assert body == "abc"


def test_resource_headers_from_the_server_are_neutralised_too() -> None:
    block = types.EmbeddedResource(
        resource=types.TextResourceContents(uri="file:///x.txt", text="hi\u202e", mime_type="text/\x1bplain")
    )
    assert content_text([block]) == "[resource file:///x.txt (text/\\x1bplain, 5 bytes)]\nhi\\u202e"


def test_a_cut_result_keeps_sizes_in_the_trace_and_drops_its_structured_copy() -> None:
    result = types.CallToolResult(content=_texts("x" * 50), structured_content={"big": "x" * 50})
    out = to_output(result, service="s", tool="t", exposed_name="t", max_chars=10)
    assert out.trace["truncated"] == {"shown_chars": 10, "total_chars": 50, "max_chars": 10}
    assert out.trace["structured_content"] is None


@given(st.lists(st.text(), max_size=5), st.integers(1, 60))
def test_any_content_stays_within_the_cap_and_safe(parts: list[str], cap: int) -> None:
    text = content_text(_texts(*parts), cap)
    body, notice = _split(text)
    assert len(body) <= cap
    assert neutralize(body) == body  # nothing left to escape
    if notice is None:  # each block on its own: a CR ending a block is not part of a CRLF
        assert body == "\n".join(neutralize(p) for p in parts)
