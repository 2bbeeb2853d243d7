"""Finding the search index daemons a test's processes launched, from their very start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def index_daemon_processes() -> Iterator[tuple[int, list[bytes], Path]]:
    """(pid, command line, /proc folder) of every running index daemon process."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"toolroute.search_daemon" in argv:
            yield int(proc.name), argv, proc


def launched_daemons(folder: Path, variable: str = "TOOLROUTE_SEARCH_INDEX_CACHE") -> list[int]:
    """Pids of the index daemon processes whose environment sets `variable` to `folder` (their cache),
    from the moment they run: a daemon names its socket only later. A launch is over before the
    process that made it goes on (a spawn returns once the command runs, and queries launch
    synchronously), so right after the queries that might launch one, none found is none launched."""
    entry = f"{variable}={folder}".encode()
    found = []
    for pid, _, proc in index_daemon_processes():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry in environ:
            found.append(pid)
    return found
