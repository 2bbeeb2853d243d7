"""Served mode keeps no fast bins (issue 62): a small block freed after the idle release's trim
goes back to the heap at once instead of waiting, counted as in use, on a page the trim then
cannot give back. Checked in a real process through glibc's own report (`malloc_info`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")

# Frees small blocks (past the thread cache: seven of a size) and reports how many sit in fast bins.
PROGRAM = r"""
import ctypes, json, sys
from toolroute.serve.heap import no_fast_bins
chosen = no_fast_bins() if sys.argv[1] == "served" else None
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
blocks = [libc.malloc(40) for _ in range(200)]
for block in blocks[::2]:
    libc.free(block)

class MallInfo2(ctypes.Structure):  # glibc's struct mallinfo2; reading it allocates nothing
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc.mallinfo2.restype = MallInfo2
print(json.dumps({"chosen": chosen, "fast": libc.mallinfo2().smblks}))
"""


def _fast_blocks(mode: str, tunables: str | None = None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_glibc_keeps_freed_small_blocks_in_fast_bins_by_default() -> None:
    assert _fast_blocks("default")["fast"] > 0  # what served mode turns off


def test_served_mode_keeps_no_fast_bins() -> None:
    assert _fast_blocks("served") == {"chosen": True, "fast": 0}


def test_an_operators_fast_bin_size_is_kept() -> None:
    result = _fast_blocks("served", "glibc.malloc.mxfast=64")
    assert result["chosen"] is False and result["fast"] > 0  # type: ignore[operator]


def test_a_release_lets_go_of_the_names_cached_for_attribute_lookups() -> None:
    """CPython's type attribute cache keeps a reference to each name it looked up: a name made at
    run time (a JSON key, a string from Rust) outlives the crowd that made it, alone on its page,
    until the release clears the cache."""
    from toolroute.serve.idle import let_go

    class Options:
        no_ignore = True

    name = "".join(["no_", "ignore"])  # made at run time: not the interned class attribute's name
    held = sys.getrefcount(name)
    assert getattr(Options(), name) is True
    assert sys.getrefcount(name) == held + 1  # the type cache's reference
    let_go()
    assert sys.getrefcount(name) == held
