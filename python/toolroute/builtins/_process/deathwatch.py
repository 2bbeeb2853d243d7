"""Commands die with the host, even when the host is SIGKILLed and cannot clean up.

Under bubblewrap this is `--die-with-parent` plus the PID namespace. Unconfined and Landlock
commands get a watchdog instead: one small process per host (`python -I -S deathwatch.py MARK`,
in its own session, started with the first such command) that blocks reading a pipe only the host
writes to. The pipe reaches EOF exactly when the host is gone, however it died; the watchdog then
SIGKILLs every process whose environment carries `TOOLROUTE_DEATHWATCH=MARK`, and its process group.
Every command gets that variable, and its descendants inherit it, so processes that left the
command's group (setsid) are found too; one that clears its environment and its group escapes.
Nothing is sent per command: the marker costs no syscall on the hot path.
PR_SET_PDEATHSIG alone would not do: it kills the shell, not what the shell started.

Processes are found by reading /proc/PID/environ on Linux; elsewhere (and in the portable build)
by `ps -axeww`, which prints each process's environment after its command line (BSD and procps
alike).

Run as a script, this file must import nothing from toolroute (it runs with -S); the host tells
it which way to look (`proc` or `ps`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

MARKER_NAME = "TOOLROUTE_DEATHWATCH"


def marked_processes(marker: str, via: str = "proc") -> list[int]:
    """Pids whose environment holds MARKER_NAME=marker (those this user may read)."""
    needle = f"{MARKER_NAME}={marker}".encode()
    return _listed_by_ps(needle) if via == "ps" else _listed_by_proc(needle)


def _listed_by_proc(needle: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
    return found


def _listed_by_ps(needle: bytes) -> list[int]:
    # The marker is a pid and a random hex string: it cannot occur split across words, and a
    # command line that merely mentions it is the watchdog itself (excluded by the caller).
    try:
        listing = subprocess.run(
            ["ps", "-axeww", "-o", "pid=,command="], capture_output=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in listing.splitlines():
        pid, _, rest = line.strip().partition(b" ")
        if pid.isdigit() and needle in rest.split():
            found.append(int(pid))
    return found


QUIET_PASSES = 5  # scans in a row that must find nothing before the watch is over
PASS_PAUSE = 0.1  # between them: a spawn the host began as it died shows its marker once exec'd
MOST_PASSES = 100


def kill_marked(marker: str, via: str = "proc") -> None:
    """SIGKILL each marked process and its group, until none has been seen for a few scans in a
    row (bounded): a process forking while we scan, or exec'ing a command the host forked just
    before it died (its marker shows only after the exec), is caught on a later pass."""
    quiet = 0
    for _ in range(MOST_PASSES):
        pids = [pid for pid in marked_processes(marker, via) if pid != os.getpid()]
        if not pids:
            quiet += 1
            if quiet >= QUIET_PASSES:
                return
            time.sleep(PASS_PAUSE)
            continue
        quiet = 0
        for pid in pids:
            with contextlib.suppress(OSError):  # gone, or its group is
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def main(marker: str, via: str) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only the host's death ends the watch
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
    kill_marked(marker, via)


class DeathWatch:
    """The host's side: one watchdog per process (a forked child starts its own)."""

    def __init__(self, via: str = "proc") -> None:
        self.via = via  # how the watchdog finds marked processes: "proc" or "ps"
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self._marker = ""
        self._atexit = False

    def marker(self) -> dict[str, str]:
        """The variable to put in a command's environment; starts the watchdog if needed.
        Empty when no watchdog can run (no interpreter path)."""
        with self._lock:
            if self._proc is None or self._owner != os.getpid() or self._proc.poll() is not None:
                self._start()
            return {MARKER_NAME: self._marker} if self._proc is not None else {}

    def _start(self) -> None:
        self._proc = None
        if not sys.executable:
            return
        marker = f"{os.getpid()}-{uuid.uuid4().hex}"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, marker, self.via],
                stdin=subprocess.PIPE,  # its only write end stays here: EOF means the host is gone
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # out of the host's group: Ctrl-C or killpg of it spare the watchdog
            )
        except OSError:
            return
        self._owner, self._marker = os.getpid(), marker
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True

    def pid(self) -> int | None:
        """The watchdog's pid, if it runs (for this process)."""
        proc = self._proc
        return proc.pid if proc is not None and self._owner == os.getpid() else None

    def close(self, timeout: float = 5.0) -> None:
        """At interpreter exit: release the watchdog now (it ends what is left) and reap it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None or self._owner != os.getpid():
            return
        assert proc.stdin is not None
        proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "proc")
