"""`toolroute.textsafety`: hidden and terminal-controlling characters become visible escapes."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from toolroute.textsafety import clip, cut_notice, neutralize, neutralize_json

KEPT = {"\n", "\t", "\u200c", "\u200d"}  # line breaks, tabs and the joiners emoji and scripts need


def _unsafe(ch: str) -> bool:
    cp = ord(ch)
    return (unicodedata.category(ch) in {"Cc", "Cf", "Cs"} and ch not in KEPT) or 0xE0100 <= cp <= 0xE01EF


def _unsafe_in(text: str) -> list[str]:
    """Unsafe characters left in `text`; a CR is fine only as part of CRLF."""
    bad = [ch for ch in text if ch != "\r" and _unsafe(ch)]
    return bad + ["\r" for i, ch in enumerate(text) if ch == "\r" and text[i + 1 : i + 2] != "\n"]


def test_every_unsafe_code_point_of_this_python_is_escaped() -> None:
    # The ranges live in the Rust core; this checks them against the interpreter's Unicode data.
    missed = [hex(cp) for cp in range(0x110000) if _unsafe(chr(cp)) and neutralize(chr(cp)) == chr(cp)]
    assert missed == []


def test_examples_from_each_family() -> None:
    assert neutralize("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"  # CSI
    assert neutralize("\x1b]0;title\x07") == "\\x1b]0;title\\x07"  # OSC ended by BEL
    assert neutralize("\x9b2J") == "\\x9b2J"  # C1 CSI
    assert neutralize("abc\u202edcba\u202c") == "abc\\u202edcba\\u202c"  # bidi override
    assert neutralize("\u2066x\u2069") == "\\u2066x\\u2069"  # bidi isolates
    assert neutralize("a\u200bb\ufeff") == "a\\u200bb\\ufeff"  # zero-width space, BOM
    assert neutralize("hi\U000e0041\U000e0042") == "hi\\U000e0041\\U000e0042"  # tag characters
    assert neutralize("over\rwrite") == "over\\x0dwrite"  # a lone CR rewrites a terminal line
    assert neutralize("\ud800x") == "\\ud800x"  # a lone surrogate would break UTF-8 later


def test_plain_text_is_the_same_object() -> None:
    for text in ["", "plain", "lines\nand\ttabs", "crlf\r\nline", "日本語", "👨\u200d👩\u200d👧", "fa\u200cce"]:
        assert neutralize(text) is text


@given(st.text())
def test_output_never_holds_an_unsafe_character(text: str) -> None:
    out = neutralize(text)
    assert _unsafe_in(out) == []
    out.encode("utf-8")  # no surrogates left


_safe_piece = st.characters(exclude_categories=("Cc", "Cf", "Cs")) | st.sampled_from(["\n", "\t", "\r\n", "\u200d"])


@given(st.lists(_safe_piece).map("".join))
def test_safe_text_passes_unchanged(text: str) -> None:
    text = "".join(ch for ch in text if not 0xE0100 <= ord(ch) <= 0xE01EF)
    assert neutralize(text) is text


@given(st.text(st.sampled_from("ab\x1b\u202e\r\n\U000e0041\\")), st.integers(0, 40))
def test_clip_never_splits_an_escape(text: str, limit: int) -> None:
    shown = clip(neutralize(text), limit)
    assert len(shown) <= limit
    assert not shown.endswith(("\\x", "\\x1", "\\u", "\\u2", "\\u20", "\\u202", "\\U000e004"))


def test_json_values_are_neutralised_keys_included() -> None:
    value = {"desc\x1b": ["a\u202e", 1, None, {"k": "\x07"}]}
    assert neutralize_json(value) == {"desc\\x1b": ["a\\u202e", 1, None, {"k": "\\x07"}]}
    json.dumps(neutralize_json(value))


def test_cut_notice_wording() -> None:
    assert cut_notice(5, 10, "bytes", "why") == "[... 5 bytes omitted of 10; why ...]"
