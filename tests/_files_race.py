"""A hostile second process for the file-tool race tests: it swaps two names with
renameat2(RENAME_EXCHANGE) in a loop, bounded in count and time, and stops by itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run in a child process: `python -c SWAPPER a b max_swaps seconds`.
SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
limit, deadline = int(sys.argv[3]), time.monotonic() + float(sys.argv[4])
print("ready", flush=True)
swaps = 0
while swaps < limit and time.monotonic() < deadline:
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0:
        swaps += 1
    time.sleep(0.0002)
# Leave the names as they started.
if swaps % 2:
    libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
print(swaps, flush=True)
"""


class Swapper:
    """`with Swapper(a, b) as s:` swaps a and b until `max_swaps` or `seconds`; `s.running()`."""

    def __init__(self, a: Path, b: Path, *, max_swaps: int = 2000, seconds: float = 3.0) -> None:
        self.args = [sys.executable, "-c", SWAPPER, str(a), str(b), str(max_swaps), str(seconds)]
        self.swaps = 0

    def __enter__(self) -> Swapper:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"
        return self

    def running(self) -> bool:
        return self.proc.poll() is None

    def __exit__(self, *exc: object) -> None:
        out, _ = self.proc.communicate(timeout=30)
        self.swaps = int(out.strip() or 0)
