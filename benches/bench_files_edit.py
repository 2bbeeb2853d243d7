"""edit on a 10 MB file: toolroute (Rust, on bytes) vs the same edit written the obvious way in Python.

Run: python -m pytest benches/bench_files_edit.py -s   (interleaved: benches/_interleave.py)
Cases: a unique exact replacement, replace_all of a common token, and a miss that must find the
nearest near-match (tab vs space indentation). Target: at least 10x faster than pure Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from _files_pure import atomic_write, edit_file, edit_text
from _interleave import Case, compare

from toolroute._core import edit_bytes
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError
from toolroute.router import ToolRouter

TARGET_BYTES = 10 * 1024 * 1024

CASES: dict[str, tuple[str, str, bool]] = {
    "unique": ("    item_330000 = value(330000)\n", "    item_330000 = value(0)\n", False),
    "replace_all": ("value(", "calc(", True),
    "near-miss": ("\titem_300000 = value(300000)\n\titem_300001 = value(300001)", "x", False),
}


@pytest.fixture(scope="module")
def content() -> bytes:
    rows: list[str] = []
    size = i = 0
    while size < TARGET_BYTES:
        row = f"    item_{i} = value({i})\n"
        rows.append(row)
        size += len(row)
        i += 1
    return "".join(rows).encode()


def replace_all_bytes(content: bytes, old: str, new: str, replace_all: bool) -> tuple[bytes, int, list[int]]:
    """The plain baseline for replace_all: bytes.replace, plus what edit also returns (the count and
    the line of every match, which needs a walk over the matches)."""
    old_b = old.encode()
    starts: list[int] = []
    line, last = 1, 0
    pos = content.find(old_b)
    while pos != -1:
        line += content.count(b"\n", last, pos)
        starts.append(line)
        last = pos
        pos = content.find(old_b, pos + len(old_b))
    return content.replace(old_b, new.encode()), len(starts), starts


def _result(fn: Callable[..., Any]) -> Callable[..., Any]:
    """(new bytes, count, lines) on success; on a miss, the line the near-match report names."""

    def run(*args: Any) -> Any:
        try:
            out = fn(*args)
        except (ValueError, ToolArgumentError) as exc:
            found = re.search(r"line (\d+)", str(exc))
            return ("miss", found and int(found[1]))
        return (bytes(out[0]), out[1], list(out[2]))

    return run


BASELINES: dict[str, tuple[str, Callable[..., Any]]] = {
    "unique": ("pure Python (str)", edit_text),
    "replace_all": ("bytes.replace + match lines", replace_all_bytes),
    "near-miss": ("pure Python (str)", edit_text),
}


@pytest.mark.parametrize("case", list(CASES))
def test_in_memory(content: bytes, case: str) -> None:
    name, baseline = BASELINES[case]
    args = (content, *CASES[case])
    rounds = 15 if case != "near-miss" else 5
    toolroute = ("toolroute", partial(_result(edit_bytes), *args))
    assert compare(f"edit in memory, 10 MB: {case}", toolroute, {name: partial(_result(baseline), *args)}, rounds)


def test_on_disk(content: bytes, tmp_path: Path) -> None:
    """The whole tool call (atomic write, fsync) against the same steps written in Python."""
    old, new, _ = CASES["unique"]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    router = ToolRouter(context=BuiltInToolContext(ours))
    args = {"path": "big.py", "old_string": old, "new_string": new}

    def restore(path: Path) -> Callable[[], None]:
        return lambda: path.write_bytes(content)

    toolroute = Case(partial(router.invoke, "edit", args), setup=restore(ours / "big.py"))
    python = Case(partial(edit_file, theirs / "big.py", old, new, False), setup=restore(theirs / "big.py"))
    toolroute.call(), python.call()
    assert (ours / "big.py").read_bytes() == (theirs / "big.py").read_bytes()  # like for like
    compare("edit on disk (atomic write), 10 MB: unique", ("toolroute", toolroute), {"pure Python": python}, 15,
            same=lambda a, b: True)  # fmt: skip


def test_on_disk_replace_all(content: bytes, tmp_path: Path) -> None:
    """Issue 25: replace_all of every `value(` (334,000 of them) in the 10 MB file, the whole tool
    call, against plain Python: read the bytes, `bytes.replace`, and an atomic write with an fsync
    of the file (durability "file" on our side). The plain side does less: it does not find the
    line of each match, which edit reports."""
    old, new, _ = CASES["replace_all"]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    router = ToolRouter(context=BuiltInToolContext(ours, durability="file"))
    args = {"path": "big.py", "old_string": old, "new_string": new, "replace_all": True}

    def plain() -> None:
        path = theirs / "big.py"
        atomic_write(path, path.read_bytes().replace(old.encode(), new.encode()))

    def restore(path: Path) -> Callable[[], None]:
        return lambda: path.write_bytes(content)

    toolroute = Case(partial(router.invoke, "edit", args), setup=restore(ours / "big.py"))
    python = Case(plain, setup=restore(theirs / "big.py"))
    toolroute.call(), python.call()
    assert (ours / "big.py").read_bytes() == (theirs / "big.py").read_bytes()  # like for like
    compare("edit on disk, 10 MB: replace_all (334,000)", ("toolroute", toolroute), {"plain Python": python}, 11,
            same=lambda a, b: True)  # fmt: skip
