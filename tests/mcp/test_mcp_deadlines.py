"""The gateway's per-call deadlines (one timer per loop): a call past its deadline times out, one
within it never does, whatever the order the calls came in; a cancellation from outside stays a
cancellation; nothing is left behind."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 uses anyio's fail_after")

from toolroute.mcp.deadlines import _CLOCKS, deadline  # noqa: E402


async def _sleep_within(seconds: float, limit: float) -> str:
    try:
        with deadline(limit):
            await asyncio.sleep(seconds)
    except TimeoutError:
        return "timeout"
    return "done"


def test_a_call_past_its_deadline_times_out_and_one_within_it_does_not() -> None:
    async def main() -> tuple[str, str]:
        return await _sleep_within(5.0, 0.05), await _sleep_within(0.0, 5.0)

    assert asyncio.run(main()) == ("timeout", "done")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=12))
def test_concurrent_calls_in_any_order_each_meet_their_own_deadline(plan: list[tuple[int, int]]) -> None:
    """Deadlines and sleeps on a 40 ms grid, far enough apart that scheduling jitter cannot flip
    an outcome: a call sleeping two steps past its deadline times out, two steps short completes.
    Calls start in list order, so earlier deadlines often arrive after later ones."""
    step = 0.04
    calls = [(sleep, limit) for sleep, limit in plan if abs(sleep - limit) >= 2]

    async def main() -> list[str]:
        return await asyncio.gather(*(_sleep_within(s * step, (limit + 1) * step) for s, limit in calls))

    outcomes = asyncio.run(main())
    assert outcomes == ["timeout" if s > limit + 1 else "done" for s, limit in calls]


def test_an_outside_cancellation_is_not_turned_into_a_timeout() -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def call() -> None:
            with deadline(5.0):
                started.set()
                await asyncio.sleep(5.0)

        task = asyncio.create_task(call())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_an_outside_cancellation_racing_the_deadline_stays_a_cancellation() -> None:
    """The timer fires and the caller cancels in the same loop iteration: the task was cancelled
    twice, so leaving the block must not swallow the caller's cancellation."""

    async def main() -> None:
        async def call() -> None:
            with deadline(0.01):
                await asyncio.sleep(5.0)

        task = asyncio.create_task(call())
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + 0.01, task.cancel)
        await asyncio.sleep(0.05)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())


def test_finished_calls_leave_nothing_and_the_loop_is_not_kept_alive() -> None:
    async def main() -> None:
        for _ in range(200):
            assert await _sleep_within(0.0, 30.0) == "done"
        clock = _CLOCKS[asyncio.get_running_loop()]
        assert clock.calls == {}
        assert clock.generation == 1  # armed at the first call's deadline, never moved since

    loop = asyncio.new_event_loop()
    loop.run_until_complete(main())
    loop.close()
    ref = weakref.ref(loop)
    del loop
    gc.collect()
    assert ref() is None


def test_a_deadline_outside_a_task_is_refused() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="no running event loop"):
            deadline(1.0).__enter__()
    finally:
        loop.close()
