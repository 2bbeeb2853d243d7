"""Served mode's allocator: every Python object from the C library's malloc (issue 62).

Python's own allocator (pymalloc) carves small objects out of 1 MiB arenas and returns an arena
only when every block in it is free: the few objects that outlive a crowd of users (caches,
interned strings, a survivor per map) are spread over the arenas of that time and keep them all
resident. With `PYTHONMALLOC=malloc` those objects come from glibc's heap instead, whose free
pages the idle release hands back (`heap.return_freed_memory`), so the process returns much
closer to where it started (docs/deploy.md, "Memory after a crowd": measured by
benches/serve_memory.py). The variable is read only at interpreter start, so `toolroute serve
--transport http` re-executes itself with it set, once, before anything else runs; an explicit
`PYTHONMALLOC` (`pymalloc` to keep Python's own) is left as it is. Over stdio the server has
one client, no crowd: it starts once, as it is.
"""

from __future__ import annotations

import os
import sys

ENV = "PYTHONMALLOC"
SERVED = "malloc"


def wanted(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether this process should be replaced by one on `SERVED`: on Linux (glibc's trim is
    what gives the pages back), unless the allocator was chosen already."""
    return sys.platform.startswith("linux") and ENV not in environ


def reexec_on_served_allocator() -> None:
    """Replace this process (same pid, descriptors and command line) with one whose Python
    objects come from malloc; returns only when nothing is to be done, or the exec failed (the
    server then runs on as it is)."""
    if not wanted():
        return
    os.environ[ENV] = SERVED
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError:
        del os.environ[ENV]
