"""Memory back to its base after a crowd: a served process that nobody uses any more, and that
holds much more memory than when it started, replaces itself with a fresh one.

CPython cannot give back memory a crowd fragmented: once the users have left, the live heap is
back where it started (traced with memray: +1 MB after 100 users), but the objects that outlive
the crowd (a cache entry, a name claimed for good, a logged traceback's source lines) are spread
over the pages and arenas the crowd used, and each keeps its page or its 1 MiB arena resident.
After 100 users the process stayed 33 MB over its base with pymalloc and glibc, 21 MB with
glibc alone, 22 MB with jemalloc, for good.

So when the idle release finds nobody left (every user released, no call running) and the
process more than `--recycle-above` MiB over its resident size at start, the server
stops accepting, finishes, closes everything, and `exec`s itself with the same command line.
The listening socket stays open throughout and is handed over (as systemd hands one over:
`LISTEN_FDS=1`, `LISTEN_PID`, descriptor 3), so a client arriving meanwhile waits in the
socket's queue and is then served; served mode is stateless (every request carries its token),
so no session is lost. The process keeps its pid, for whatever supervises it.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable

from toolroute.serve.heap import return_freed_memory

log = logging.getLogger("toolroute.serve")

RECYCLE_ABOVE_MIB = 32
LISTEN_FD = 3  # systemd's SD_LISTEN_FDS_START


def inherited_socket() -> socket.socket | None:
    """The listening socket handed to this process (by a recycle, or by systemd's socket
    activation: `LISTEN_FDS=1` and `LISTEN_PID` naming this process), else None. The variables
    are removed, so no child takes them for its own."""
    fds, pid = os.environ.get("LISTEN_FDS"), os.environ.get("LISTEN_PID")
    if fds is None or pid != str(os.getpid()):
        return None
    for name in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    if fds != "1":
        raise ValueError(f"LISTEN_FDS={fds}: toolroute serve listens on exactly one socket")
    sock = socket.socket(fileno=LISTEN_FD)
    if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
        sock.detach()
        raise ValueError(f"descriptor {LISTEN_FD} handed over by LISTEN_FDS is not a TCP socket")
    sock.set_inheritable(False)
    return sock


def resident_bytes() -> int | None:
    """This process's resident memory, or None where /proc does not say."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class Recycle:
    """The decision to replace the process (nobody is served, as `quiet` says, and it is far
    over its size at start), and the handover of its listening socket."""

    def __init__(self, quiet: Callable[[], bool], above_mib: float = RECYCLE_ABOVE_MIB) -> None:
        if above_mib <= 0:
            raise ValueError("the recycle threshold must be positive (MiB over the resident size at start)")
        self.quiet = quiet
        self.above = int(above_mib * 1024 * 1024)
        self.base: int | None = None
        self._stop_serving: Callable[[], None] | None = None
        self._socket: socket.socket | None = None
        # The second descriptor of the listening socket, kept while a recycle is requested.
        self._kept_fd: int | None = None
        self._lock = threading.Lock()  # between the idle thread's request and a signal's withdraw
        self._refused = False  # a stop was asked for: no recycle from now on

    @property
    def requested(self) -> bool:
        return self._kept_fd is not None

    def serving(self, sock: socket.socket, stop_serving: Callable[[], None]) -> None:
        """The server is up on `sock`: its resident size now is the base; `stop_serving` ends it."""
        # The settled size: what starting left free (imports' and compilation's garbage) would
        # otherwise count in the base, and an idle release's trim could take the process below it.
        gc.collect()
        return_freed_memory()
        self.base = resident_bytes()
        self._socket, self._stop_serving = sock, stop_serving

    def due(self) -> int | None:
        """Bytes over the base when nobody is served and the process is past the threshold,
        else None."""
        if self.base is None or not self.quiet():
            return None
        now = resident_bytes()
        if now is None or now - self.base <= self.above:
            return None
        return now - self.base

    def request(self) -> bool:
        """Stop serving, keeping the listening socket open for the process that follows. False
        when it will not be (a stop was asked for, or the server is not up)."""
        with self._lock:
            if self._refused or self.requested or self._socket is None or self._stop_serving is None:
                return False
            # A second descriptor of the socket: the server closes its own as it stops, and the
            # socket must go on listening (queueing new clients) until the fresh process accepts.
            self._kept_fd = os.dup(self._socket.fileno())
        self._stop_serving()
        return True

    def request_if_due(self) -> bool:
        """`request` when `due`; True if the recycle has begun."""
        over = self.due()
        if over is None or not self.request():
            return False
        log.warning("nobody served, and %.0f MiB over the size at start: recycling", over / 2**20)
        return True

    def withdraw(self) -> None:
        """A stop was asked for (a signal): no recycle now or later; the process ends."""
        with self._lock:
            self._refused = True
            if self._kept_fd is not None:
                os.close(self._kept_fd)
                self._kept_fd = None

    def exec_fresh(self) -> None:
        """Replace this process with a fresh run of the same command line, handing it the
        listening socket. Returns only if the exec failed (then the socket is closed)."""
        with self._lock:
            fd, self._kept_fd = self._kept_fd, None
        if fd is None:  # never requested, or withdrawn
            return
        if fd != LISTEN_FD:
            os.dup2(fd, LISTEN_FD, inheritable=True)
            os.close(fd)
        else:
            os.set_inheritable(fd, True)
        os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            os.execv(sys.executable, sys.orig_argv)
        except OSError:
            log.exception("recycling the process failed: it ends instead")
            for name in ("LISTEN_FDS", "LISTEN_PID"):
                os.environ.pop(name, None)
            os.close(LISTEN_FD)
