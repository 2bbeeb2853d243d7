"""What a long-running server asks of the C library's allocator (glibc; elsewhere nothing).

glibc gives threads allocation arenas of their own, up to eight per core, and an arena's pages
are reused only by the threads on it: a crowd of users served by forty worker threads leaves
memory spread over sixteen arenas, most of it free and kept. A few arenas serve a Python server
as well (the GIL serialises most allocation) and its memory returns to where it started.

Small freed blocks wait in fast bins until the next consolidation, counted as in use: the trim
cannot give the page such a block sits on. Served mode keeps none (with no thread caches either,
`allocator.py`), so a block freed after the idle release's trim does not hold its page until the
next one.
"""

from __future__ import annotations

import ctypes
import functools
import os

ARENAS = 4
_M_ARENA_MAX = -8  # glibc's malloc.h
_M_MXFAST = 1
_MXFAST_TUNABLE = "glibc.malloc.mxfast"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` allocation arenas from now on, unless MALLOC_ARENA_MAX already chose.
    Call it early: threads that have one keep theirs. True if the limit was set."""
    libc = _libc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))


def no_fast_bins() -> bool:
    """Freed small blocks go back to the heap at once from now on (fast bins of size 0), unless
    `GLIBC_TUNABLES` chose their size. True if set."""
    libc = _libc()
    if libc is None or _MXFAST_TUNABLE in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    return bool(libc.mallopt(_M_MXFAST, 0))


def return_freed_memory() -> None:
    """`malloc_trim(0)`: hand the free pages of every arena back to the operating system."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
