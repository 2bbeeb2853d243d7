"""Commands die with the host, even when the host is SIGKILLed and cannot clean up.

Under bubblewrap this is `--die-with-parent` plus the PID namespace. Unconfined and Landlock
commands get a watchdog instead: one small process per host (`python -I -S deathwatch.py`, in its
own process group, started on first use) that reads "+PGID" / "-PGID" lines on a pipe from the
host. The host holds the only write end, so the pipe reaches EOF exactly when the host is gone,
however it died; the watchdog then SIGKILLs every group still registered and exits.
PR_SET_PDEATHSIG alone would not do: it kills the shell, not what the shell started.

Run as a script, this file must import nothing from toolroute (it runs with -S).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading


def watch_loop(fd: int) -> set[int]:
    """Track the groups announced on `fd` until EOF; returns those still registered."""
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        if not chunk:
            return groups
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only the host's death ends the watch
    for pgid in watch_loop(0):
        with contextlib.suppress(OSError):  # already gone
            os.killpg(pgid, signal.SIGKILL)


class DeathWatch:
    """The host's side: one watchdog per process (a forked child starts its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0

    def _send(self, line: bytes) -> None:
        with self._lock:
            for _ in range(2):  # a watchdog that died (killed by hand) is replaced once
                proc = self._ensure()
                if proc is None:
                    return
                try:
                    assert proc.stdin is not None
                    os.write(proc.stdin.fileno(), line)
                    return
                except OSError:
                    self._proc = None

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._owner == os.getpid():
            return self._proc
        if not sys.executable:
            return None
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # out of the host's group: Ctrl-C or killpg of it spare the watchdog
            )
        except OSError:
            return None
        self._owner = os.getpid()
        return self._proc

    def watch(self, pgid: int) -> None:
        self._send(b"+%d\n" % pgid)

    def unwatch(self, pgid: int) -> None:
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                return
        self._send(b"-%d\n" % pgid)


WATCH = DeathWatch()

if __name__ == "__main__":
    main()
