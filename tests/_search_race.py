"""A bounded race against grep and glob, run as its own process so that a hang fails the test.

One process swaps a workspace folder (or file) with a symlink to outside (or a FIFO) using
renameat2(RENAME_EXCHANGE) as fast as it can; this process calls the tool over and over and
counts results that name or contain anything from outside. Prints one JSON line of counts.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

RENAME_EXCHANGE = 2
AT_FDCWD = -100
MARK = "SECRET"


def exchange(a: str, b: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)


def swapper(a: str, b: str, stop: Any, swaps: Any) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    ab, bb = a.encode(), b.encode()
    n = 0
    while not stop.is_set():
        libc.renameat2(AT_FDCWD, ab, AT_FDCWD, bb, RENAME_EXCHANGE)
        n += 1
    swaps.value = n


def layout(base: Path, kind: str) -> tuple[Path, str, str]:
    """The workspace and the two names the swapper exchanges."""
    ws, outside = base / "ws", base / "outside"
    (outside / "dir").mkdir(parents=True)
    for i in range(5):
        (outside / "dir" / f"{MARK}_{i}.txt").write_text(f"needle {MARK}\n")
    (ws / "a").mkdir(parents=True)
    for i in range(5):
        (ws / "a" / f"inside_{i}.txt").write_text("needle inside\n")
    (ws / "top.txt").write_text("needle top\n")
    if kind == "fifo":
        (ws / "f.txt").write_text("needle file\n")
        os.mkfifo(ws / "p")
        return ws, str(ws / "f.txt"), str(ws / "p")
    os.symlink(outside / "dir", ws / "b")
    return ws, str(ws / "a"), str(ws / "b")


def run(base: Path, case: str, tries: int, seconds: float) -> dict[str, Any]:
    from toolroute.context import BuiltInToolContext
    from toolroute.router import ToolRouter

    kind = "fifo" if case.startswith("fifo") else "dir"
    ws, a, b = layout(base, kind)
    router = ToolRouter(context=BuiltInToolContext(ws))
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "grep_path": ("grep", {"pattern": "needle", "path": "a"}),
        "grep_walk": ("grep", {"pattern": "needle"}),
        "grep_follow": ("grep", {"pattern": "needle", "follow_symlinks": True}),
        "grep_follow_path": ("grep", {"pattern": "needle", "path": "a", "follow_symlinks": True}),
        "glob_walk": ("glob", {"pattern": "*.txt"}),
        "glob_path": ("glob", {"pattern": "*.txt", "path": "a"}),
        "glob_follow": ("glob", {"pattern": "*.txt", "follow_symlinks": True}),
        "fifo_grep_path": ("grep", {"pattern": "needle", "path": "f.txt"}),
        "fifo_grep_walk": ("grep", {"pattern": "needle"}),
        "fifo_glob": ("glob", {"pattern": "*", "sort": "modified"}),
    }
    tool, args = calls[case]
    stop = multiprocessing.Event()
    swaps = multiprocessing.Value("q", 0)
    proc = multiprocessing.Process(target=swapper, args=(a, b, stop, swaps))
    proc.start()
    leaked = done = inside = 0
    deadline = time.monotonic() + seconds
    try:
        while done < tries and time.monotonic() < deadline:
            try:
                out = router.execute(tool, json.dumps(args))
            except Exception:  # a refused path mid-swap is a correct outcome
                done += 1
                continue
            done += 1
            seen = out.text + json.dumps(out.trace)
            leaked += MARK in seen
            inside += "inside" in seen or "needle file" in seen
    finally:
        stop.set()
        proc.join(10)
    return {"case": case, "calls": done, "leaked": leaked, "inside": inside, "swaps": swaps.value}


if __name__ == "__main__":
    base, case, tries, seconds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    print(json.dumps(run(base, case, tries, seconds)))
