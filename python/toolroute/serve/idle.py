"""Users who left cost nothing after a while: a daemon thread releases every user unseen for
`--idle-timeout` seconds (`Tenancy.release_idle`: their door, workspace context and own upstream
server processes), then lets go of what they leave: the worker threads idle since (each holds
its stack and its allocator cache), the garbage cycles among their objects (a full collection:
the young generations fill slowly once traffic stops), and the freed heap, handed back to the
operating system (glibc keeps freed pages for reuse otherwise, so the process would stay at its
peak after a crowd left)."""

from __future__ import annotations

import gc
import linecache
import logging
import sys
import threading
from collections.abc import Callable

from toolroute._workers import POOLS
from toolroute.serve.heap import return_freed_memory
from toolroute.serve.recycle import Recycle
from toolroute.serve.tenants import Tenancy

log = logging.getLogger("toolroute.serve")


def let_go() -> None:
    """After a release: end the idle worker threads, collect the cycles (the threads end
    meanwhile), trim the heap."""
    for pool in POOLS:
        pool.shed()
    # A traceback logged meanwhile (a client gone mid-call) left the source of every file it
    # passed through in `linecache`, for the process's life: thousands of small strings made
    # during the crowd, each keeping the allocator's page or arena it landed in.
    linecache.clearcache()
    # CPython's type attribute cache (4,096 entries) holds a reference to each name looked up, and
    # names made at run time (a JSON key, a string from Rust) are fresh objects: a crowd left
    # about 2,700 of them, each alone on a page of the crowd's heap (issue 62).
    sys._clear_type_cache()
    gc.collect()
    return_freed_memory()


class IdleRelease:
    """Every `idle / 4` seconds (at most a minute), release the users idle for `idle` seconds,
    and run `prune` (the doors' per-user bookkeeping: counters and connection sets of users who
    left, which would otherwise grow with every user the server has met and, made while a crowd
    was in, keep the allocator's arenas of that time alive). With `recycle`, a round that finds
    it due (nobody served, the process far over its size at start) has the process replaced
    (serve/recycle.py)."""

    def __init__(
        self,
        tenancy: Tenancy,
        idle: float,
        prune: Callable[[], int] | None = None,
        *,
        recycle: Recycle | None = None,
    ) -> None:
        if idle <= 0:
            raise ValueError("the idle timeout must be positive")
        self.tenancy = tenancy
        self.prune = prune
        self.recycle = recycle
        # A recycle follows users who left: a fresh process, not yet seen by anyone, is not
        # "nobody left" while its first requests are still being authenticated.
        self._released_any = False
        self.idle = idle
        self.interval = min(idle / 4, 60.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolroute-idle-release", daemon=True)

    def start(self) -> IdleRelease:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                gone = self.tenancy.release_idle(self.idle)
                pruned = 0 if self.prune is None else self.prune()
            except Exception:  # never let one failure end the releases
                log.exception("releasing idle users failed")
                continue
            if gone:
                log.info("released %d idle user(s)", len(gone))
            if gone or pruned:
                let_go()
            self._released_any = self._released_any or bool(gone)
            if self._released_any and self.recycle is not None and self.recycle.request_if_due():
                return

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
