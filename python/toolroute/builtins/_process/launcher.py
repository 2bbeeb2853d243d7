"""Every command is started from one thread that lives as long as the process, taking the owners
of the spawns it is asked for in turn.

Linux sends a child its parent-death signal (`PR_SET_PDEATHSIG`: the Landlock helper's, and
bubblewrap's `--die-with-parent`) when the *thread* that forked it ends, not the process. Tool
calls run on worker threads that come and go (an idle one ends after 30 s; a served release
sheds them at once), so a background command started on one was SIGKILLed with it, silently,
long before its user or the server was done with it. Handing each spawn to this one thread ties
every command's life to the host process, as the signal was meant to.

One thread for everyone is one queue for everyone, so it is kept per owner (the `working_for` of
`_workers.py`: a served tenant) and the owners are served in turn, as the worker threads are: a
tenant running eight `bash true` loops queues behind its own spawns, and another tenant's spawn
waits for at most one of them (it waited for the whole backlog before: p50 650 ms to 3.2 s).

A spawn costs milliseconds; the handover costs one queue put and one wake-up (tens of µs).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from toolroute._workers import current_owner

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


class _Turns:
    """Requests queued per owner; `take` serves the owners in turn, each its oldest first."""

    def __init__(self) -> None:
        self._ready = threading.Condition(threading.Lock())
        self._queued: OrderedDict[Hashable | None, deque[_Request[Any]]] = OrderedDict()

    def put(self, owner: Hashable | None, request: _Request[Any]) -> None:
        with self._ready:
            self._queued.setdefault(owner, deque()).append(request)
            self._ready.notify()

    def waiting(self) -> int:
        with self._ready:
            return sum(len(requests) for requests in self._queued.values())

    def take(self) -> _Request[Any]:
        with self._ready:
            while not self._queued:
                self._ready.wait()
            owner, requests = next(iter(self._queued.items()))
            request = requests.popleft()
            if requests:
                self._queued.move_to_end(owner)  # its next spawn waits for the others' turn
            else:
                del self._queued[owner]
            return request


class Launcher:
    """Runs spawns on one long-lived daemon thread (started on first use, again after a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns = _Turns()
        self._thread: threading.Thread | None = None
        self._owner = 0  # the pid whose thread it is: a forked child starts its own

    def run(self, fn: Callable[[], T], abandon: Callable[[T], object]) -> T:
        """`fn()` (a spawn) on the launcher thread, in the turn of the owner this caller works
        for; its result or exception here. If this caller is interrupted while waiting
        (KeyboardInterrupt), the spawned child is handed to `abandon` (which ends it) rather
        than left running with nobody to reap it."""
        if threading.current_thread() is self._thread:
            return fn()
        request = _Request(fn, abandon)
        self._ensure().put(current_owner(), request)
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

    def waiting(self) -> int:
        """Spawns queued, not yet begun."""
        return self._turns.waiting()

    def _ensure(self) -> _Turns:
        with self._lock:
            if self._thread is not None and self._owner == os.getpid() and self._thread.is_alive():
                return self._turns
            self._turns = _Turns()  # a forked child's copy may hold its parent's requests
            self._owner = os.getpid()
            self._thread = threading.Thread(
                target=self._serve, args=(self._turns,), name="toolroute-launcher", daemon=True
            )
            self._thread.start()
            return self._turns

    @staticmethod
    def _serve(turns: _Turns) -> None:
        while True:
            request = turns.take()
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
