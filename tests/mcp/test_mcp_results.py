"""MCP results -> the model's text: capped while converting, control characters made visible."""

from __future__ import annotations

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from toolroute._core import CUT_NOTICE
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


# The notice a cap of `cap` characters writes, for `omitted` of `total`: its length is what the
# text gives up so that the notice fits inside the cap.
def _notice(omitted: int, total: int, cap: int) -> str:
    return (
        f"[... {omitted} characters omitted of {total}; this gateway passes at most {cap} characters of one MCP "
        "result; ask the tool for less (a narrower query, a page or a range) to see the rest ...]"
    )


def test_blocks_are_cut_in_order_and_the_notice_counts_what_is_missing() -> None:
    cap = len(_notice(307, 307, 300)) + 11  # room for ten characters of text and the line break
    text = content_text(_texts("a" * 6, "b" * 300), cap)
    body, notice = _split(text)
    assert body == "aaaaaa\nbbb"
    assert notice == _notice(297, 307, cap)
    assert len(text) == cap


def test_escapes_count_against_the_cap_and_are_never_split() -> None:
    cap = len(_notice(304, 304, 300)) + 10
    body, notice = _split(content_text(_texts("ab\x1b\x1b\x1b" + "c" * 300), cap))
    assert body == "ab\\x1b"  # the next escape would pass the nine characters left
    assert notice == _notice(302, 305, cap)


def test_a_crlf_is_not_split_into_a_lone_cr() -> None:
    body, _ = _split(content_text(_texts("abc\r\n" + "d" * 300), len(_notice(305, 305, 300)) + 5))
    assert body == "abc"


def test_a_cap_smaller_than_the_notice_gets_the_short_one_and_holds() -> None:
    text = content_text(_texts("x" * 500), 100)
    assert len(text) == 100 and text.endswith(CUT_NOTICE) and text.startswith("x" * 60)
    assert content_text(_texts("x" * 500), 20) == "x" * 20


def test_resource_headers_from_the_server_are_neutralised_too() -> None:
    block = types.EmbeddedResource(
        resource=types.TextResourceContents(uri="file:///x.txt", text="hi\u202e", mime_type="text/\x1bplain")
    )
    assert content_text([block]) == "[resource file:///x.txt (text/\\x1bplain, 5 bytes)]\nhi\\u202e"


def test_a_cut_result_keeps_sizes_in_the_trace_and_drops_its_structured_copy() -> None:
    result = types.CallToolResult(content=_texts("x" * 50), structured_content={"big": "x" * 50})
    out = to_output(result, service="s", tool="t", exposed_name="t", max_chars=10)
    assert out.trace["truncated"] == {"shown_chars": 10, "total_chars": 50, "max_chars": 10}
    assert len(out.text) == 10
    assert out.trace["structured_content"] is None


@given(st.lists(st.text(max_size=400), max_size=5), st.integers(1, 600))
def test_any_content_stays_within_the_cap_and_safe(parts: list[str], cap: int) -> None:
    text = content_text(_texts(*parts), cap)
    assert len(text) <= cap  # the notice included: the cap is what the model reads
    body, _ = _split(text)
    body = body.removesuffix(CUT_NOTICE)
    assert neutralize(body) == body  # nothing left to escape
    whole = "\n".join(neutralize(p) for p in parts)  # each block on its own: a CR ending one is no CRLF
    if len(whole) <= cap:
        assert text == whole
    else:
        assert whole.startswith(body) and len(body) < len(whole)


@given(st.text(max_size=300), st.integers(1, 600))
def test_an_uncut_text_results_block_is_what_the_model_reads(text: str, cap: int) -> None:
    result = types.CallToolResult(content=_texts(text))
    out = to_output(result, service="s", tool="t", exposed_name="t", max_chars=cap)
    if "truncated" in out.trace:
        return  # a cut result's blocks: test_a_cut_result_keeps_sizes_in_the_trace_and_drops_its_structured_copy
    (block,) = out.content
    assert block.text == neutralize(text) == out.text  # control characters made visible in the block too
    if neutralize(text) == text:
        assert block is result.content[0]  # nothing to change: the server's block passes as it came
