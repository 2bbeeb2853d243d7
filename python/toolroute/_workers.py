"""Warm worker threads for sync tools awaited on an asyncio loop.

`anyio.to_thread.run_sync` (and `asyncio.to_thread`) hand each call to an executor through
several layers (a capacity limiter, a concurrent future wrapped into an asyncio one, a cancel
scope): about 130 to 160 microseconds a call here, whatever the tool does. A sync tool awaited
from an agent's loop needs only this: run `fn` in a thread that is already waiting, in a copy of
the caller's context, and wake the loop with the result. That costs one queue put, one thread
wake-up and one `call_soon_threadsafe`: about 25 microseconds.

Threads start when every running one is busy (up to `MAX_WORKERS`, as anyio's default limit) and
end after `IDLE_SECONDS` without work, or at once when `shed()` asks (a server whose users left).
Items are put on the queue under the same lock a worker takes before it decides to end, so no
item is ever left without a thread to run it.

`run_off_loop` runs short sync work from async code (sync tool calls, served mode's lookups) on
these threads on asyncio, on anyio's pool elsewhere (trio). anyio's idle threads end only when a
later call prunes them, so a server that used them for a crowd kept forty threads and their
stacks after it left. (The agent's batch lanes and abandoned tool calls keep anyio's threads: a
lane lives as long as its batch, so a warm pool would gain nothing.)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
import sniffio

T = TypeVar("T")

MAX_WORKERS = 40
IDLE_SECONDS = 30.0

_Item = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any], contextvars.Context]
_SHED = None  # in the queue: the idle thread that takes it ends, unless work is waiting


class WarmWorkers:
    """A pool of threads fed by one queue, answering on the caller's event loop."""

    def __init__(self, max_workers: int = MAX_WORKERS, idle_seconds: float = IDLE_SECONDS) -> None:
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._max = max_workers
        self._idle_seconds = idle_seconds
        self._threads = 0
        self._idle = 0  # threads waiting for an item
        self._queued = 0  # items put and not yet taken

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def idle(self) -> int:
        """Threads waiting for work."""
        return self._idle

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` in a warm thread, in a copy of this task's context; cancelling the awaiting
        task cancels the wait (the thread finishes `fn` on its own)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        item: _Item = (loop, future, fn, contextvars.copy_context())
        with self._lock:
            self._queue.put(item)
            self._queued += 1
            if self._queued > self._idle and self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._work, name="toolroute-worker", daemon=True).start()
        return await future

    def shed(self) -> int:
        """Ask the threads waiting for work to end now; returns how many were asked."""
        with self._lock:
            asked = max(self._idle - self._queued, 0)
            for _ in range(asked):
                self._queue.put(_SHED)
        return asked

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                item = self._queue.get(timeout=self._idle_seconds)
            except queue.Empty:
                item = _SHED
            if item is _SHED:
                with self._lock:
                    self._idle -= 1
                    if self._queued == 0:  # no work was put meanwhile (puts hold this lock)
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            self._run(item)
            # Not kept while waiting for the next one: the item holds the call's context (a
            # served user's workspace, open) and its result.
            del item

    @staticmethod
    def _run(item: _Item) -> None:
        loop, future, fn, context = item
        try:
            result = context.run(fn)
        except BaseException as exc:  # handed to the awaiting task, raised there
            _answer(loop, future, None, exc)
        else:
            _answer(loop, future, result, None)


def _answer(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop has closed: nobody is waiting
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting task was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


WORKERS = WarmWorkers()  # tool calls
# A server's own lookups (keys, the user registry): apart, so forty slow tool calls of one
# tenant never hold up another's authentication.
LOOKUPS = WarmWorkers()
POOLS = (WORKERS, LOOKUPS)


async def run_off_loop(fn: Callable[[], T], pool: WarmWorkers = WORKERS) -> T:
    """`fn()` on a worker thread of `pool` in a copy of this task's context; cancelling the
    awaiting task abandons the wait (the thread finishes `fn` on its own)."""
    if sniffio.current_async_library() == "asyncio":
        return await pool.run(fn)
    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
