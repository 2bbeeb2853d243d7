"""Warm worker threads for sync tools awaited on an asyncio loop, shared fairly between owners.

`anyio.to_thread.run_sync` (and `asyncio.to_thread`) hand each call to an executor through
several layers (a capacity limiter, a concurrent future wrapped into an asyncio one, a cancel
scope): about 130 to 160 microseconds a call here, whatever the tool does. A sync tool awaited
from an agent's loop needs only this: run `fn` in a thread that is already waiting, in a copy of
the caller's context, and wake the loop with the result. That costs one hand-over to a waiting
thread and one `call_soon_threadsafe`: about 25 microseconds.

**Owners.** A served server runs every tenant's calls on these threads, so one tenant must not
take them all: five tenants each within their own limits held all forty with `sleep 20`, and a
sixth tenant's `echo` waited 16 s behind them. Each piece of work belongs to the owner named by
`working_for` (served mode: the user; None elsewhere), and
- an owner holds at most `share` threads at once (counted until its function returns, however
  long after its caller stopped waiting: abandoned work still counts); more of its work waits in
  its own queue;
- a freed thread takes the next queued work of the owner holding the fewest threads (ties go
  round the owners in turn), never simply the oldest work of the busiest;
- an owner holding no thread at all may start one beyond `max_workers` (up to `ceiling`): the
  first call of a tenant nobody has served yet never waits behind other tenants' long calls.

Threads start when no thread waits (up to `max_workers`, as anyio's default limit), end after
`IDLE_SECONDS` without work, or at once when `shed()` asks (a server whose users left); a thread
started beyond `max_workers` ends when its owner's queue is empty.

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
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

import anyio.to_thread
import sniffio

T = TypeVar("T")

MAX_WORKERS = 40
IDLE_SECONDS = 30.0
# Threads at most, counting those owners without one may start beyond `max_workers`.
CEILING_FACTOR = 4

_owner: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar("toolroute_worker_owner", default=None)


def current_owner() -> Hashable | None:
    """Whom the work running here belongs to (`working_for`; None outside any)."""
    return _owner.get()


@contextlib.contextmanager
def working_for(owner: Hashable | None) -> Iterator[None]:
    """Work run off the loop inside this block belongs to `owner` (its share of the threads)."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


class _Item:
    __slots__ = ("context", "fn", "future", "loop", "owner")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        fn: Callable[[], Any],
        context: contextvars.Context,
        owner: Hashable | None,
    ) -> None:
        self.loop, self.future, self.fn, self.context, self.owner = loop, future, fn, context, owner


class _Thread:
    """A worker's inbox: an item handed to it, or None to end."""

    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()


class WarmWorkers:
    """A pool of threads shared fairly between owners, answering on the caller's event loop."""

    def __init__(
        self,
        max_workers: int = MAX_WORKERS,
        idle_seconds: float = IDLE_SECONDS,
        *,
        share: int | None = None,
        ceiling: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._max = max_workers
        self._idle_seconds = idle_seconds
        self.share = share  # threads one owner may hold at once (None: no owner limit)
        self._ceiling = ceiling if ceiling is not None else max_workers * CEILING_FACTOR
        self._threads = 0
        self._shed_busy = 0  # threads busy at the last shed, still to end once they are idle
        self._waiting: list[_Thread] = []  # threads with nothing to do, the warmest last
        self._queued: OrderedDict[Hashable | None, deque[_Item]] = OrderedDict()  # per owner, in turn
        self._holding: dict[Hashable | None, int] = {}  # threads each owner holds now

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def idle(self) -> int:
        """Threads waiting for work."""
        return len(self._waiting)

    def holding(self, owner: Hashable | None) -> int:
        """Threads `owner`'s work holds now (running, or abandoned by its caller and running on)."""
        with self._lock:
            return self._holding.get(owner, 0)

    def queued(self, owner: Hashable | None) -> int:
        """`owner`'s work waiting for a thread."""
        with self._lock:
            return len(self._queued.get(owner, ()))

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` in a warm thread, in a copy of this task's context, for the owner `working_for`
        names; cancelling the awaiting task cancels the wait (work not begun never runs; begun,
        the thread finishes `fn` on its own, still counted as its owner's)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        item = _Item(loop, future, fn, contextvars.copy_context(), _owner.get())
        with self._lock:
            handed = self._admit(item)
        if handed is not None:
            handed.inbox.put(item)
        return await future

    def _admit(self, item: _Item) -> _Thread | None:
        """Place `item` (under the lock): the waiting thread to hand it to, or None when a new
        thread takes it or it waits in its owner's queue."""
        owner = item.owner
        holding = self._holding.get(owner, 0)
        if owner in self._queued or not self._may_hold(owner, holding):
            self._queue(item)  # behind its owner's earlier work, or over its share
            return None
        if self._waiting:
            self._holding[owner] = holding + 1
            return self._waiting.pop()
        if self._threads < self._max or (holding == 0 and self._threads < self._ceiling):
            self._holding[owner] = holding + 1
            self._threads += 1
            # Handed over through its inbox, not as the thread's argument: a Thread keeps its
            # arguments until it ends, and so would keep this call's context and result.
            thread = _Thread()
            thread.inbox.put(item)
            threading.Thread(target=self._work, args=(thread,), name="toolroute-worker", daemon=True).start()
            return None
        self._queue(item)
        return None

    def _may_hold(self, owner: Hashable | None, holding: int) -> bool:
        return self.share is None or owner is None or holding < self.share

    def _queue(self, item: _Item) -> None:
        self._queued.setdefault(item.owner, deque()).append(item)

    def _next(self) -> _Item | None:
        """The next queued item a freed thread takes (under the lock): of the owner holding the
        fewest threads among those under their share, the owners taken in turn on a tie."""
        best: Hashable | None = None
        best_holding = -1
        for owner in self._queued:
            holding = self._holding.get(owner, 0)
            if self._may_hold(owner, holding) and (best_holding < 0 or holding < best_holding):
                best, best_holding = owner, holding
        if best_holding < 0:
            return None
        items = self._queued[best]
        item = items.popleft()
        if items:
            self._queued.move_to_end(best)  # its next item waits for the others' turn
        else:
            del self._queued[best]
        self._holding[best] = best_holding + 1
        return item

    def shed(self) -> int:
        """Ask the threads waiting for work to end now, and the busy ones to end when they find
        none next (one just back from its work would otherwise wait on for good); returns how
        many were asked now."""
        with self._lock:
            ending, self._waiting = self._waiting, []
            self._threads -= len(ending)
            self._shed_busy = self._threads
        for thread in ending:
            thread.inbox.put(None)
        return len(ending)

    def _work(self, me: _Thread) -> None:
        item = me.inbox.get()
        while item is not None:
            self._run(item)
            owner = item.owner
            # Not kept while waiting for the next one: the item holds the call's context (a
            # served user's workspace, open) and its result.
            del item
            with self._lock:
                left = self._holding[owner] - 1
                if left:
                    self._holding[owner] = left
                else:
                    del self._holding[owner]
                item = self._next()
                if item is None:
                    # Started beyond the pool for an owner, or busy when the pool was shed: ends.
                    if self._threads > self._max or self._shed_busy > 0:
                        self._shed_busy = max(0, self._shed_busy - 1)
                        self._threads -= 1
                        return
                    self._waiting.append(me)
            if item is None:
                item = self._wait(me)

    def _wait(self, me: _Thread) -> _Item | None:
        """The next item handed to this waiting thread; None to end (idle too long, or shed)."""
        try:
            return me.inbox.get(timeout=self._idle_seconds)
        except queue.Empty:
            pass
        with self._lock:
            if me in self._waiting:  # nobody handed it anything meanwhile: it ends
                self._waiting.remove(me)
                self._threads -= 1
                return None
        return me.inbox.get()  # an item (or a shed) was put as it timed out: take it

    @staticmethod
    def _run(item: _Item) -> None:
        if item.future.done():  # the awaiting task was cancelled before the work began
            return
        try:
            result = item.context.run(item.fn)
        except BaseException as exc:  # handed to the awaiting task, raised there
            _answer(item.loop, item.future, None, exc)
        else:
            _answer(item.loop, item.future, result, None)


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
