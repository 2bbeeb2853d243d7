"""Per-call deadlines on one asyncio loop, sharing one timer.

`asyncio.timeout` schedules a timer handle and cancels it again on every call: about 5 us, the
largest part of the gateway's own cost per call. Here a call's deadline is a dict entry, and the
loop holds one timer, at the earliest deadline of the calls in flight; it is moved only when a call
comes in with an earlier deadline, and when it fires it cancels the calls past their deadline the
way `asyncio.timeout` does (the task is cancelled; the `with` block turns that into TimeoutError).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from types import TracebackType


class _Clock:
    """The calls in flight on one loop, and its one timer."""

    # No reference to the loop here, not even a timer handle (it holds its loop): the clock is the
    # value of a weak mapping keyed by the loop. A timer that was moved earlier is left to fire
    # and do nothing, recognised by its generation.
    def __init__(self) -> None:
        self.calls: dict[deadline, None] = {}
        self.armed_at = math.inf
        self.generation = 0

    def add(self, call: deadline, loop: asyncio.AbstractEventLoop) -> None:
        self.calls[call] = None
        if call.at < self.armed_at:
            self._arm(call.at, loop)

    def _arm(self, at: float, loop: asyncio.AbstractEventLoop) -> None:
        self.generation += 1
        self.armed_at = at
        loop.call_at(at, self._fire, self.generation)

    def _fire(self, generation: int) -> None:
        if generation != self.generation:
            return
        self.armed_at = math.inf
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = [call for call in self.calls if call.at <= now]
        for call in due:
            del self.calls[call]
            if not call.task.done():
                call.expired = True
                call.task.cancel()
        if self.calls:
            self._arm(min(call.at for call in self.calls), loop)


_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Clock] = weakref.WeakKeyDictionary()


class deadline:
    """`with deadline(seconds):` inside a task on an asyncio loop; raises TimeoutError when the
    block runs past it. Not reentrant: one object per block, which is also its entry among the
    loop's calls in flight."""

    __slots__ = ("at", "cancelling", "clock", "expired", "seconds", "task")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("deadline() must be used inside a task")
        clock = _CLOCKS.get(loop)
        if clock is None:
            clock = _CLOCKS[loop] = _Clock()
        self.task, self.clock = task, clock
        self.at = loop.time() + self.seconds
        self.cancelling = task.cancelling()
        self.expired = False
        clock.add(self, loop)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.clock.calls.pop(self, None)
        # Only our own cancellation becomes a timeout: if the task was also cancelled from outside,
        # its cancel count stays above what it was on entry and the cancellation goes on.
        if self.expired and self.task.uncancel() <= self.cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from exc
