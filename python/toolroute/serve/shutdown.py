"""A server's end is bounded: whatever it is doing, a stop signal ends the process, and everything it
started, within `STOP_BOUND` seconds.

The first SIGTERM (or SIGINT) stops the server gracefully (calls get their grace, upstream sessions
close, background processes end) and starts a clock; at `FORCE_AFTER`, or at a second signal,
what is left is ended at once: every command's process group and every process descended from the
server gets SIGKILL, and the process exits. What had already left the server's tree is the
watchdog's (`deathwatch.py`), which ends it when the process is gone. Before this, a SIGTERM with
a tenant's silent upstream server in its handshake took 45 s, and a second SIGTERM changed nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

STOP_BOUND = 15.0  # seconds from the first signal to the process gone (issue 55)
FORCE_AFTER = 12.0  # the graceful stop's share of it; the rest is for the kill and the exit
FORCED_EXIT = 1


class Shutdown:
    """Counts stop signals; the first starts the clock, the second (or the clock) forces.
    With `force_after` None (a server embedded in another program, which owns its process),
    signals are only counted."""

    def __init__(self, force_after: float | None = FORCE_AFTER) -> None:
        self.force_after = force_after
        self._signals = 0
        self._clock: threading.Timer | None = None

    @property
    def started(self) -> bool:
        return self._signals > 0

    def asked(self) -> None:
        """A stop signal arrived (call it from the handler)."""
        self._signals += 1
        if self.force_after is None:
            return
        if self._signals > 1:
            self.force("a second stop signal")
        if self._clock is None:
            self._clock = threading.Timer(self.force_after, self.force, (f"{self.force_after:.0f} s after the signal",))
            self._clock.daemon = True
            self._clock.start()

    def cancel(self) -> None:
        """The stop finished in time (the process goes on to exit, or to replace itself)."""
        if self._clock is not None:
            self._clock.cancel()

    def exit_now(self) -> None:
        """The graceful stop is done (everything closed): exit without the interpreter's own
        teardown, whose collection of every object took 6 s of the bound on a loaded machine.
        The watchdog is let go first (it ends what left the tree), and the streams flushed."""
        import logging

        from toolroute.builtins._process.pump import WATCH

        self.cancel()
        WATCH.close()
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)

    def force(self, why: str) -> None:
        """End what is left, now, and exit."""
        with contextlib.suppress(Exception):
            print(f"toolroute: stopping by force ({why}): what is left is killed", file=sys.stderr, flush=True)
        kill_descendants()
        os._exit(FORCED_EXIT)


def kill_descendants() -> int:
    """SIGKILL every process descended from this one (and its process group, where it leads
    one: a command's, an upstream server's session), the watchdog excepted (it ends, once this
    process is gone, what left the tree). Returns how many were found."""
    from toolroute.builtins._process.pump import WATCH

    spared = WATCH.pid()
    found = [pid for pid in descendants(os.getpid()) if pid != spared]
    for pid in found:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(found)


def descendants(root: int) -> list[int]:
    """Pids of the processes below `root` (read from /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, frontier = [], [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found += below
        frontier += below
    return found
