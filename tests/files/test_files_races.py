"""Check-then-use races, tried as a hostile local process would: while a second process swaps a
workspace folder (or file) with a symlink to outside, or a file with a FIFO, the file tools never
read or write outside the roots and never hang. Each case is bounded (swaps, calls and seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _files_helpers import patch, router_for, tree_hash, write
from _files_race import Swapper

from toolroute.errors import ToolError

MAX_CALLS = 400
SECRET = "SECRET-outside"


@pytest.fixture
def swap_dir(tmp_path: Path) -> tuple[Path, Path, Path]:
    """ws/d (a real folder with f.txt) and ws/alt (a symlink to the outside folder)."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    write(ws, "d/f.txt", "inside\n")
    write(outside, "f.txt", SECRET + "\n")
    os.symlink(outside, ws / "alt")
    return ws, outside, tmp_path


def _hammer(ws: Path, a: Path, b: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], int]:
    """Call the tools in a loop while `a` and `b` are swapped; the texts returned, and the swaps."""
    router = router_for(ws)
    texts: list[str] = []
    with Swapper(a, b) as swapper:
        n = 0
        while swapper.running() and n < MAX_CALLS:
            name, args = calls[n % len(calls)]
            n += 1
            try:
                texts.append(str(router.invoke(name, args)))
            except ToolError as exc:  # refused or failed: never outside
                texts.append(str(exc))
    assert swapper.swaps > 0
    return texts, swapper.swaps


def test_read_file_never_reads_outside(swap_dir: tuple[Path, Path, Path]) -> None:
    ws, _, _ = swap_dir
    texts, _ = _hammer(ws, ws / "d", ws / "alt", [("read_file", {"path": "d/f.txt"})])
    assert not [t for t in texts if SECRET in t]
    assert any("inside" in t for t in texts)


@pytest.mark.parametrize(
    "calls",
    [
        [("write_file", {"path": "d/new/deeper.txt", "content": "x" * 4096})],
        [("write_file", {"path": "d/f.txt", "content": "rewritten\n"})],
        [
            ("edit", {"path": "d/f.txt", "old_string": "inside", "new_string": "edited"}),
            ("edit", {"path": "d/f.txt", "old_string": "edited", "new_string": "inside"}),
        ],
        [
            ("apply_patch", {"patch": patch("*** Update File: d/f.txt", "@@", "-inside", "+patched")}),
            ("apply_patch", {"patch": patch("*** Update File: d/f.txt", "@@", "-patched", "+inside")}),
            ("apply_patch", {"patch": patch("*** Add File: d/added.txt", "+new")}),
            ("apply_patch", {"patch": patch("*** Delete File: d/added.txt")}),
        ],
    ],
    ids=["write_file-new-folders", "write_file", "edit", "apply_patch"],
)
def test_writes_never_land_outside(swap_dir: tuple[Path, Path, Path], calls: list[tuple[str, dict[str, Any]]]) -> None:
    ws, outside, _ = swap_dir
    before = tree_hash(outside)
    texts, _ = _hammer(ws, ws / "d", ws / "alt", calls)
    assert tree_hash(outside) == before, sorted(p.name for p in outside.rglob("*"))
    assert not [t for t in texts if SECRET in t]


def test_update_agents_md_never_leaves_the_workspace(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    write(ws, "AGENTS.md", "# notes\n")
    write(outside, "secret.md", SECRET + "\n")
    os.symlink(outside / "secret.md", ws / "alias.md")
    before = tree_hash(outside)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("update_agents_md", {"action": "read"}),
        ("update_agents_md", {"action": "append", "text": "more"}),
        ("update_agents_md", {"action": "write", "content": "# notes\n"}),
    ]
    texts, _ = _hammer(ws, ws / "AGENTS.md", ws / "alias.md", calls)
    assert tree_hash(outside) == before
    assert not [t for t in texts if SECRET in t]


FIFO_CHILD = r"""
import sys
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter
from toolroute.errors import ToolError
r = ToolRouter(context=BuiltInToolContext(sys.argv[1]))
calls = [("read_file", {"path": "f.txt"}),
         ("edit", {"path": "f.txt", "old_string": "a", "new_string": "b"}),
         ("edit", {"path": "f.txt", "old_string": "b", "new_string": "a"}),
         ("apply_patch", {"patch": "*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+a2\n*** End Patch\n"}),
         ("write_file", {"path": "f.txt", "content": "a\n", "mode": "append"})]
for i in range(int(sys.argv[2])):
    name, args = calls[i % len(calls)]
    try:
        r.invoke(name, args)
    except ToolError:
        pass
print("done", flush=True)
"""


def test_fifo_swapped_in_never_hangs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "f.txt", "a\n")
    os.mkfifo(ws / "pipe")
    with Swapper(ws / "f.txt", ws / "pipe", seconds=6.0):
        child = subprocess.run(
            [sys.executable, "-c", FIFO_CHILD, str(ws), "300"], capture_output=True, text=True, timeout=60
        )
    assert child.stdout.strip() == "done", child.stderr[-2000:]
