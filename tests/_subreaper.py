"""Run a command as the child of a process that is its descendants' subreaper: whatever the command
starts and leaves behind when it ends becomes this process's child, not init's, so a test can
read from the process table exactly what outlived it.

`python _subreaper.py INFO -- COMMAND...`: the command inherits this process's standard streams;
INFO (a file) gets `pid N` once it runs and `exit CODE` once it ended. This process then stays,
reaping what ends, until it gets SIGTERM (it ends what is left first, so nothing outlives a test).
Linux only (PR_SET_CHILD_SUBREAPER). Imports nothing from toolroute.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children() -> list[int]:
    """Live (not zombie) children of this process."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    rest = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(rest[1]) == me and rest[0] not in (b"Z", b"X"):
                found.append(int(entry))
    return found


def main() -> None:
    info, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("cannot become a subreaper")
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    proc = subprocess.Popen(command)
    with open(info, "a") as f:
        f.write(f"pid {proc.pid}\n")
    code = proc.wait()
    with open(info, "a") as f:
        f.write(f"exit {code}\n")
    while not stopping:  # reap what ends; a test reads what does not
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        time.sleep(0.05)
    for pid in children():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
