"""What grep and glob share on the Python side: argument shapes, paging and the skip notice."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from toolroute._core import CancelFlag, search_daemon_command
from toolroute.cancellation import current_cancel_token
from toolroute.errors import ToolExecutionError
from toolroute.outputcap import cap_text

# How a process whose searches go to an index daemon starts one (docs/search.md).
search_daemon_command([sys.executable, "-m", "toolroute.search_daemon"])

T = TypeVar("T")

# Text after the page: worst case length of the paging footer, kept free in the output budget.
FOOTER_RESERVE = 240


def cancellable(search: Callable[[CancelFlag | None], T], tool: str) -> T:
    """`search(flag)`, where `flag` stops the Rust search when the current call is cancelled
    (its client went away): the search gives its worker thread back at its next file or read,
    instead of running on for nobody. Without a cancel token (a plain sync call), no flag."""
    token = current_cancel_token()
    if token is None:
        return search(None)
    flag = CancelFlag()
    with token.on_cancel(flag.cancel):
        result = search(flag)
    if flag.cancelled:  # what was found so far is not the answer to the question asked
        raise ToolExecutionError(f"{tool} was cancelled before it finished", tool=tool)
    return result


def split_globs(value: str | Sequence[str] | None) -> list[str]:
    """rg-style `glob` values: a list, or one string split on whitespace and on commas outside `{}`."""
    if value is None:
        return []
    if not isinstance(value, str):
        return [g for item in value for g in split_globs(item)]
    globs: list[str] = []
    current: list[str] = []
    depth = 0
    for char in value:
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(depth - 1, 0)
        if depth == 0 and (char == "," or char.isspace()):
            if current:
                globs.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        globs.append("".join(current))
    return globs


def as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    return list(value)


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def skip_notice(stats: Mapping[str, Any]) -> str:
    """Say what the walk left out and which option brings it back ('' when nothing was)."""
    parts: list[str] = []
    if stats.get("ignored"):
        parts.append(
            f"{_entries(stats['ignored'])} excluded by ignore files (.gitignore, .ignore, git excludes; "
            "an ignored directory counts once): pass no_ignore=true to include them"
        )
    if stats.get("hidden"):
        n = stats["hidden"]
        parts.append(f"{n} hidden (dot) entr{'y' if n == 1 else 'ies'} skipped: pass hidden=true to include them")
    if stats.get("binary"):
        n = stats["binary"]
        parts.append(f"{n} binary file{'s' if n != 1 else ''} not searched: pass text=true to search them as text")
    if stats.get("outside_roots"):
        parts.append(f"{stats['outside_roots']} symlink(s) pointing outside the allowed roots not followed")
    if stats.get("errors"):
        first = (stats.get("first_errors") or [""])[0][:200]
        parts.append(f"{stats['errors']} unreadable entries, broken links or symlink loops skipped ({first})")
    return "[Skipped: " + "; ".join(parts) + ".]" if parts else ""


def paging_footer(offset: int, shown: int, total: int, tool: str) -> str:
    """The marker after a partial page: how much is left and the exact call that continues."""
    if offset + shown >= total:
        return ""
    remaining = total - offset - shown
    return (
        f"[Showing results {offset + 1}-{offset + shown} of {total}; {remaining} more not shown. "
        f"Call {tool} again with offset={offset + shown} to continue, or narrow the search.]"
    )


def assemble(parts: Sequence[str], max_chars: int) -> str:
    """Join the non-empty parts, never longer than `max_chars` (a hard cut with the notice guards
    tiny limits; the budget normally fits)."""
    return cap_text("\n".join(p.rstrip("\n") for p in parts if p), max_chars)


def body_budget(max_chars: int, *fixed: str) -> int:
    used = sum(len(f) + 1 for f in fixed) + FOOTER_RESERVE
    return max(max_chars - used, min(max_chars, 80))
