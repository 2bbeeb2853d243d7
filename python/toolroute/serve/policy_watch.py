"""Served mode's policy file (`--policy FILE`), read again when it changes on disk.

Each request looks at the file's stamp (one `stat`); a changed file is loaded and, if it is
sound, replaces the policy for the next request on. A broken new file keeps the old policy and
logs why, once per version of the file; at startup a broken file refuses to start.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from toolroute.errors import ToolArgumentError
from toolroute.policy import Policy, PolicyFileError

log = logging.getLogger("toolroute.serve")

Stamp = tuple[int, int, int, int]  # inode, size, mtime in ns, ctime in ns


def _stamp(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PolicyWatch:
    """The policy in force, and the file it came from."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp = _stamp(self.path)
        try:
            self.policy = Policy.load(self.path)
        except PolicyFileError as exc:
            raise ToolArgumentError(f"--policy: {exc}") from None
        self.generation = 0  # how many times a new file took over

    def check(self) -> bool:
        """Load the file if it changed since last looked at; True when a new policy took over."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return False
        with self._lock:
            if stamp == self._stamp:
                return False
            self._stamp = stamp  # tried once per version, whatever comes of it
            try:
                policy = Policy.load(self.path)
            except PolicyFileError as exc:
                log.warning("policy file changed but is not used; the previous policy stays: %s", exc)
                return False
            self.policy = policy
            self.generation += 1
            log.warning("policy reloaded from %s (%d rules)", self.path, len(policy.rules))
            return True
