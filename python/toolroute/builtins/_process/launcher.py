"""Every command is started from one thread that lives as long as the process.

Linux sends a child its parent-death signal (`PR_SET_PDEATHSIG`: the Landlock helper's, and
bubblewrap's `--die-with-parent`) when the *thread* that forked it ends, not the process. Tool
calls run on worker threads that come and go (an idle one ends after 30 s; a served release
sheds them at once), so a background command started on one was SIGKILLed with it, silently,
long before its user or the server was done with it. Handing each spawn to this one thread ties
every command's life to the host process, as the signal was meant to.

A spawn costs milliseconds; the handover costs one queue put and one wake-up (tens of µs).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Request(Generic[T]):
    __slots__ = ("abandon", "done", "error", "fn", "lock", "result", "settled")

    def __init__(self, fn: Callable[[], T], abandon: Callable[[T], object]) -> None:
        self.fn, self.abandon = fn, abandon
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.settled = False  # the caller took the result, or gave up on it
        self.result: T | None = None
        self.error: BaseException | None = None


class Launcher:
    """Runs spawns on one long-lived daemon thread (started on first use, again after a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Request[Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._owner = 0  # the pid whose thread it is: a forked child starts its own

    def run(self, fn: Callable[[], T], abandon: Callable[[T], object]) -> T:
        """`fn()` (a spawn) on the launcher thread; its result or exception here. If this caller
        is interrupted while waiting (KeyboardInterrupt), the spawned child is handed to
        `abandon` (which ends it) rather than left running with nobody to reap it."""
        if threading.current_thread() is self._thread:
            return fn()
        request = _Request(fn, abandon)
        self._ensure()
        self._queue.put(request)
        try:
            request.done.wait()
        except BaseException:
            with request.lock:
                request.settled = True
                made = request.done.is_set() and request.error is None
            if made:
                abandon(request.result)  # type: ignore[arg-type]  # a result exists once made
            raise
        with request.lock:
            request.settled = True
        if request.error is not None:
            raise request.error
        return request.result  # type: ignore[return-value]  # set when there is no error

    def _ensure(self) -> None:
        with self._lock:
            if self._thread is not None and self._owner == os.getpid() and self._thread.is_alive():
                return
            self._queue = queue.SimpleQueue()  # a forked child's copy may hold its parent's requests
            self._owner = os.getpid()
            self._thread = threading.Thread(
                target=self._serve, args=(self._queue,), name="toolroute-launcher", daemon=True
            )
            self._thread.start()

    @staticmethod
    def _serve(requests: queue.SimpleQueue[_Request[Any]]) -> None:
        while True:
            request = requests.get()
            try:
                result = request.fn()
            except BaseException as exc:  # handed to the caller, raised there
                request.error = exc
            else:
                request.result = result
            with request.lock:
                abandoned = request.settled and request.error is None
                request.done.set()
            if abandoned:  # the caller gave up before the spawn finished
                with contextlib.suppress(Exception):  # the launcher must outlive any one spawn
                    request.abandon(request.result)
            del request


LAUNCHER = Launcher()
