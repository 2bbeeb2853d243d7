"""Served mode's allocator: every Python object from the C library's malloc, with no per-thread
caches of freed blocks (issue 62).

Python's own allocator (pymalloc) carves small objects out of 1 MiB arenas and returns an arena
only when every block in it is free: the few objects that outlive a crowd of users (caches,
interned strings, a survivor per map) are spread over the arenas of that time and keep them all
resident. With `PYTHONMALLOC=malloc` those objects come from glibc's heap instead, whose free
pages the idle release hands back (`heap.return_freed_memory`), so the process returns much
closer to where it started (docs/deploy.md, "Memory after a crowd": measured by
benches/serve_memory.py).

glibc's trim gives back only pages on which no block is in use, and a block freed into a
thread's cache (tcache, up to seven of each size per thread) or a fast bin counts as in use: the
blocks freed last by the crowd's teardown, one here and one there, kept their pages. Without
them (`GLIBC_TUNABLES=glibc.malloc.tcache_count=0` here, fast bins off in `heap.py`) a freed
block goes back to the heap at once; 500 users left 17.5 MB behind instead of 21.0
(benches/serve_memory.py).

Both variables are read only at process start, so `toolroute serve --transport http` re-executes
itself with them set, once, before anything else runs; a value the operator set
(`PYTHONMALLOC=pymalloc` to keep Python's own, a `GLIBC_TUNABLES` naming the tcache) is left as
it is. Over stdio the server has one client, no crowd: it starts once, as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ENV = "PYTHONMALLOC"
SERVED = "malloc"
TUNABLES_ENV = "GLIBC_TUNABLES"
# Freed blocks go straight back to the heap, where the idle release's trim can give their pages.
SERVED_TUNABLES = {"glibc.malloc.tcache_count": "0"}


def _tunables(environ: Mapping[str, str]) -> str | None:
    """`GLIBC_TUNABLES` with the served settings the operator did not set; None if nothing is to add."""
    present = environ.get(TUNABLES_ENV, "")
    named = {item.split("=", 1)[0] for item in present.split(":") if item}
    missing = [f"{name}={value}" for name, value in SERVED_TUNABLES.items() if name not in named]
    if not missing:
        return None
    return ":".join(filter(None, [present, *missing]))


def served_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What the served process's environment lacks (empty: nothing to do). Linux only: glibc's
    trim is what gives the pages back."""
    if not sys.platform.startswith("linux"):
        return {}
    wanted: dict[str, str] = {}
    if ENV not in environ:
        wanted[ENV] = SERVED
    tunables = _tunables(environ)
    if tunables is not None:
        wanted[TUNABLES_ENV] = tunables
    return wanted


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process should be replaced by one with the served allocator settings."""
    return bool(served_environment(environ))


def reexec_on_served_allocator() -> None:
    """Replace this process (same pid, descriptors and command line) with one whose Python
    objects come from malloc, without thread caches; returns only when nothing is to be done,
    or the exec failed (the server then runs on as it is)."""
    missing = served_environment()
    if not missing:
        return
    before = {name: os.environ.get(name) for name in missing}
    os.environ.update(missing)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
