"""Progress of the call running now, delivered to whoever asked for it.

A served client that sends a `progressToken` with `tools/call` gets `notifications/progress` for
that call. The served door opens a `ProgressSink` for the call (`reporting`); what runs below it
reports to `current_progress()`: the MCP gateway hands on each progress notification of the upstream call
(asking upstream for progress only when someone downstream asked), bash reports while its
command runs and grep while it searches (`ticking`), every `report_interval()` seconds. Without a
sink nothing is reported and nothing costs anything.

Reports come from any thread or loop (the gateway's loop, a worker thread) and are delivered in
order, one at a time, on the loop that owns the client's session; `aclose` waits (boundedly) for
the last of them, so they all go out before the call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

log = logging.getLogger("toolroute.progress")

Send = Callable[[float, "float | None", "str | None"], Awaitable[None]]

# A sink holds at most this many undelivered reports; past it the oldest are dropped (progress
# is a running figure: a later report says at least as much as an earlier one).
MAX_PENDING = 256
CLOSE_WAIT = 2.0  # seconds `aclose` waits for undelivered reports before dropping them
INTERVAL_VARIABLE = "TOOLROUTE_PROGRESS_INTERVAL"

T = TypeVar("T")


def report_interval() -> float:
    """Seconds between the progress reports of a built-in that runs long: 1, or what
    `TOOLROUTE_PROGRESS_INTERVAL` says (at least 0.01)."""
    try:
        return max(0.01, float(os.environ.get(INTERVAL_VARIABLE, "1")))
    except ValueError:
        return 1.0


class ProgressSink:
    """One call's progress channel to the client that asked for it."""

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._send = send
        self._loop = loop or asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._pending: deque[tuple[float, float | None, str | None]] = deque(maxlen=MAX_PENDING)
        self._draining: asyncio.Task[None] | None = None
        self._closed = False
        self._last = -math.inf

    def report(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Queue one report, from any thread; never blocks. Progress must increase (MCP says so):
        a report that does not is dropped."""
        with self._lock:
            if self._closed or not progress > self._last:
                return
            self._last = progress
            self._pending.append((progress, total, message))
        with contextlib.suppress(RuntimeError):  # the session's loop is gone: nobody listens now
            self._loop.call_soon_threadsafe(self._drain_soon)

    async def areport(self, progress: float, total: float | None, message: str | None) -> None:
        """`report` as the SDK's progress callback: an upstream call's notifications, handed on."""
        self.report(progress, total, message)

    def _drain_soon(self) -> None:
        if self._draining is None or self._draining.done():
            self._draining = self._loop.create_task(self._drain())

    async def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                progress, total, message = self._pending.popleft()
            try:
                await self._send(progress, total, message)
            except Exception as exc:  # a client that went away: the call itself goes on
                log.debug("progress notification not delivered: %s", exc)
                with self._lock:
                    self._pending.clear()
                return

    async def aclose(self) -> None:
        """No more reports; wait (on the sink's loop, at most CLOSE_WAIT) for queued ones to go out."""
        with self._lock:
            self._closed = True
        await asyncio.sleep(0)  # let reports scheduled from other threads just now start draining
        task = self._draining
        if task is not None and not task.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), CLOSE_WAIT)
            if not task.done():
                task.cancel()


_current: contextvars.ContextVar[ProgressSink | None] = contextvars.ContextVar("toolroute_progress", default=None)


def current_progress() -> ProgressSink | None:
    """The sink of the call running in this context, if its caller asked for progress."""
    return _current.get()


@contextlib.contextmanager
def reporting(sink: ProgressSink | None) -> Iterator[None]:
    """Make `sink` the current call's (worker threads started inside inherit it)."""
    token = _current.set(sink)
    try:
        yield
    finally:
        _current.reset(token)


def ticking(sink: ProgressSink | None, figure: Callable[[], tuple[float, str]], work: Callable[[], T]) -> T:
    """`work()`, reporting `figure()` (progress, message) to `sink` every `report_interval()`
    seconds while it runs (from a thread of its own: `work` may hold no lock the figure needs);
    just `work()` without a sink."""
    if sink is None:
        return work()
    done = threading.Event()
    every = report_interval()

    def tick() -> None:
        while not done.wait(every):
            progress, message = figure()
            sink.report(progress, None, message)

    reporter = threading.Thread(target=tick, name="toolroute-progress", daemon=True)
    reporter.start()
    try:
        return work()
    finally:
        done.set()
        reporter.join()
