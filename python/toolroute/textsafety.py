"""What text from outside may look like when it reaches a model: visible and bounded.

Text that a third party controls (an upstream MCP server's results, tool descriptions, schemas and
error messages) can carry characters that render as nothing or rewrite what is around them:
ANSI/VT escape sequences (CSI, OSC, ...), other C0/C1 controls, Unicode bidi overrides and
isolates, zero-width and tag characters ("ASCII smuggling"), and lone surrogates that break UTF-8
encoding downstream. `neutralize` makes each of them visible as a Python-style escape (`\\x1b`,
`\\u202e`, `\\U000e0041`) instead of dropping it, so a reader sees that something was there.

Kept as is: `\\n`, `\\t`, `\\r` directly before `\\n` (a CRLF line ending), and the zero-width
joiner/non-joiner (U+200C, U+200D), which emoji sequences and several scripts need to render.
The set is every Unicode character of category Cc (controls), Cf (format) and Cs (surrogates)
but those, plus the variation selectors supplement (U+E0100-U+E01EF), usable to hide bytes after
any character. The scan is in the Rust core (rust/textsafety/src/lib.rs, which holds the ranges): a
regex here costs about 100 ms per MB of clean text, the core about a millisecond. A test checks
the ranges against the interpreter's `unicodedata`.

`cut_notice` is the one wording for a marker where output was cut out of the middle (how much, of
how much, why); a cut at the end of capped output is `_core.CUT_NOTICE` (rust/textsafety/src/lib.rs).
"""

from __future__ import annotations

import re
from typing import Any

from toolroute._core import neutralize_text

_SURROGATES = re.compile(r"[\ud800-\udfff]")  # only Python strings can hold them


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def neutralize(text: str) -> str:
    """`text` with every hidden or terminal-controlling character escaped; the same object when
    there is none (the common case: one pass in the Rust core, no copy)."""
    try:
        out = neutralize_text(text)
    except UnicodeEncodeError:  # lone surrogates cannot cross into Rust: escape them first
        text = _SURROGATES.sub(_escape_surrogate, text)
        out = neutralize_text(text)
    return text if out is None else out


def neutralize_json(value: Any) -> Any:
    """`neutralize` applied to every string (keys included) of a JSON-like value."""
    if isinstance(value, str):
        return neutralize(value)
    if isinstance(value, dict):
        return {neutralize(k) if isinstance(k, str) else k: neutralize_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [neutralize_json(v) for v in value]
    return value


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters without splitting an escape `neutralize` wrote
    (a lone `\\x1` would read as something else). Escapes are at most 10 characters long."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    slash = head.rfind("\\", max(0, limit - 10))
    if slash != -1:
        tail = text[slash : slash + 10]
        escape = re.match(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", tail)
        if escape is not None and slash + escape.end() > limit:
            head = head[:slash]
    return head


def cut_notice(omitted: int, total: int, unit: str, detail: str) -> str:
    """The marker left where output was cut: how much is missing, of how much, and why."""
    return f"[... {omitted} {unit} omitted of {total}; {detail} ...]"
