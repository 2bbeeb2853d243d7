"""The one output cap: every text a built-in returns or raises is bounded here, after it has been
serialised, by the context's `max_output_chars`, with the one notice (`CUT_NOTICE`, defined in
the Rust core's textsafety.rs, which the search renderer uses too).

Tools fit their own output first (pages, byte budgets, paging markers), so this cut is the
backstop that makes the bound hold for what the model actually receives: a directory listing,
a success summary of 1,500 files, an error that quotes the model's input. Errors are held to
`MAX_ERROR_CHARS` as well: what they quote of the model's input is a short prefix.
"""

from __future__ import annotations

from typing import TypeVar

from toolroute._core import CUT_NOTICE
from toolroute.errors import ToolError
from toolroute.textsafety import clip

MAX_ERROR_CHARS = 2000  # an error's whole text: it quotes a prefix of the input, never all of it

E = TypeVar("E", bound=ToolError)


def cap_text(text: str, limit: int) -> str:
    """`text` if it fits `limit` characters, else its start and CUT_NOTICE, `limit` in all (never
    splitting an escape that `neutralize` wrote)."""
    if len(text) <= limit:
        return text
    if len(CUT_NOTICE) >= limit:
        return clip(text, limit)
    return clip(text, limit - len(CUT_NOTICE)) + CUT_NOTICE


def cap_error(exc: E, limit: int) -> E:
    """`exc` with its message held to `min(limit, MAX_ERROR_CHARS)` (the same object: its type,
    attributes and cause stay)."""
    message = str(exc)
    bound = min(limit, MAX_ERROR_CHARS)
    if len(message) > bound:
        exc.args = (cap_text(message, bound),)
    return exc


__all__ = ["CUT_NOTICE", "MAX_ERROR_CHARS", "cap_error", "cap_text"]
