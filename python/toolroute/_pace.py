"""How an async caller runs a sync tool that did not say whether it blocks (`quick=None`).

A hop to a worker thread and back costs 90 to 150 microseconds on an idle machine (the kernel's
wake-ups on both sides), which is most of an agent's call to a small pure-Python tool. So such a
tool is measured instead: it runs on a worker thread until `FIRST_PROOF` runs in a row each took
at most `INLINE_BUDGET`, then inline on the caller's loop while each run stays within the budget.
A run over the budget sends it back to the thread, and it must then prove itself over twice as
many runs (up to `MAX_PROOF`), so a tool that blocks only sometimes soon stays on the thread.
The loop is held at most once per lapse, for as long as that one run took; a tool that may block
for long says so with `quick=False` and never runs inline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

INLINE_BUDGET = 0.0002  # seconds a run may take and still count as never blocking
FIRST_PROOF = 16  # runs in a row within the budget before the first inline run
MAX_PROOF = 1024


class Pace:
    """One tool's record: whether it runs inline now, and the streak that earns it."""

    __slots__ = ("inline", "needed", "streak")

    def __init__(self) -> None:
        self.inline = False
        self.streak = 0
        self.needed = FIRST_PROOF

    def ran(self, seconds: float) -> None:
        """Count one run (on a thread or inline); racing counts from threads only blur the
        streak, never the budget check of a run."""
        if seconds <= INLINE_BUDGET:
            self.streak += 1
            if self.streak >= self.needed:
                self.inline = True
            return
        if self.inline:
            self.needed = min(self.needed * 2, MAX_PROOF)
        self.inline = False
        self.streak = 0

    def timed(self, fn: Callable[[], T]) -> Callable[[], T]:
        """`fn`, counting how long each run takes."""

        def run() -> T:
            started = time.perf_counter()
            try:
                return fn()
            finally:
                self.ran(time.perf_counter() - started)

        return run
