"""The warm workers that run sync tools awaited on an asyncio loop (`_workers.py`): results,
errors and context variables come back; calls run side by side; a cancelled wait leaves the pool
working; idle threads end without stranding an item put while they were ending; a loop that
closes before its answer does not break the thread that had it."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import pytest

from toolroute._workers import WarmWorkers
from toolroute.cancellation import current_cancel_token, run_sync_cancellable

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_results_errors_and_context_come_back() -> None:
    workers = WarmWorkers()

    async def main() -> None:
        VAR.set("caller's")
        assert await workers.run(lambda: 41 + 1) == 42
        assert await workers.run(VAR.get) == "caller's"
        assert await workers.run(threading.current_thread) is not threading.current_thread()
        with pytest.raises(ZeroDivisionError):
            await workers.run(lambda: 1 / 0)

    asyncio.run(main())


def test_calls_run_side_by_side() -> None:
    """Eight calls that can only finish together (a barrier of eight) all finish."""
    workers = WarmWorkers()
    barrier = threading.Barrier(8, timeout=20)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(workers.run(barrier.wait) for _ in range(8))))

    assert sorted(asyncio.run(main())) == list(range(8))
    assert workers.threads <= 8


def test_a_cancelled_wait_leaves_the_pool_working() -> None:
    workers = WarmWorkers()
    release = threading.Event()
    finished = threading.Event()

    def slow() -> str:
        release.wait(20)
        finished.set()
        return "late"

    async def main() -> str:
        task = asyncio.ensure_future(workers.run(slow))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        return await workers.run(lambda: "next")

    assert asyncio.run(main()) == "next"
    assert finished.wait(20)


def test_idle_threads_end_and_no_item_is_stranded() -> None:
    """With threads ending after a millisecond idle, bursts of calls keep landing on threads
    that are just deciding to end: every call is answered, then the pool empties."""
    workers = WarmWorkers(idle_seconds=0.001)

    async def main() -> int:
        answered = 0
        for burst in range(60):
            results = await asyncio.wait_for(
                asyncio.gather(*(workers.run(lambda n=n: n) for n in range(burst % 5 + 1))), timeout=20
            )
            answered += len(results)
            await asyncio.sleep(0.002 * (burst % 3))
        return answered

    assert asyncio.run(main()) == sum(b % 5 + 1 for b in range(60))
    deadline = time.monotonic() + 20
    while workers.threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert workers.threads == 0


def _wait_for_threads(workers: WarmWorkers, count: int) -> int:
    deadline = time.monotonic() + 20
    while workers.threads != count and time.monotonic() < deadline:
        time.sleep(0.01)
    return workers.threads


def test_shed_ends_every_idle_thread_at_once() -> None:
    """Threads that would wait an hour for work end when asked: all of them, not only the one
    that takes the last request to end (each sees the others' requests still queued)."""
    workers = WarmWorkers(idle_seconds=3600)
    barrier = threading.Barrier(8, timeout=20)

    async def main() -> None:
        await asyncio.gather(*(workers.run(barrier.wait) for _ in range(8)))

    asyncio.run(main())
    assert workers.threads == 8
    deadline = time.monotonic() + 20  # a thread that just answered is not back waiting yet
    while workers.idle < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert workers.shed() == 8
    assert _wait_for_threads(workers, 0) == 0
    assert asyncio.run(_one(workers)) == "again"  # and the pool starts over on demand


async def _one(workers: WarmWorkers) -> str:
    return await workers.run(lambda: "again")


def test_shed_while_calls_arrive_strands_no_call() -> None:
    """Shedding from another thread while bursts of calls arrive: every call is answered, and
    a busy thread is never asked to end (only idle ones are)."""
    workers = WarmWorkers(idle_seconds=3600)
    stop = threading.Event()

    def shedding() -> None:
        while not stop.is_set():
            workers.shed()
            time.sleep(0.0005)

    shedder = threading.Thread(target=shedding, daemon=True)
    shedder.start()

    async def main() -> int:
        answered = 0
        for burst in range(80):
            results = await asyncio.wait_for(
                asyncio.gather(*(workers.run(lambda n=n: n) for n in range(burst % 6 + 1))), timeout=20
            )
            assert sorted(results) == list(range(burst % 6 + 1))
            answered += len(results)
            if burst % 4 == 0:
                await asyncio.sleep(0.001)
        return answered

    try:
        assert asyncio.run(main()) == sum(b % 6 + 1 for b in range(80))
    finally:
        stop.set()
        shedder.join(20)
    workers.shed()
    assert _wait_for_threads(workers, 0) == 0


def test_a_closed_loop_does_not_break_the_thread() -> None:
    workers = WarmWorkers(max_workers=1)
    release = threading.Event()

    async def abandon() -> None:
        task = asyncio.ensure_future(workers.run(lambda: release.wait(20)))
        await asyncio.sleep(0.05)
        assert not task.done()

    asyncio.run(abandon())  # the loop closes with the call still running
    release.set()

    async def again() -> str:
        return await asyncio.wait_for(workers.run(lambda: "still here"), timeout=20)

    assert asyncio.run(again()) == "still here"


def test_sync_tools_keep_their_cancel_token_on_the_fast_path() -> None:
    """The worker thread sees the call's CancelToken (bash registers its stop callback on it),
    and cancelling the awaiting task fires it."""
    seen: list[object] = []
    started = threading.Event()

    def tool() -> str:
        token = current_cancel_token()
        seen.append(token)
        started.set()
        assert token is not None
        deadline = time.monotonic() + 20
        while not token.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        return "stopped" if token.cancelled else "never cancelled"

    async def main() -> None:
        task = asyncio.ensure_future(run_sync_cancellable(tool))
        while not started.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen and seen[0] is not None and seen[0].cancelled  # type: ignore[attr-defined]


def test_a_warm_worker_keeps_nothing_of_the_call_it_ran() -> None:
    """A served user's workspace context rides in the call's context variables: a worker that
    kept its last item while waiting would hold that workspace open after the user left."""
    import asyncio
    import contextvars
    import gc
    import weakref

    from toolroute._workers import WarmWorkers

    class Workspace:
        pass

    var: contextvars.ContextVar[Workspace | None] = contextvars.ContextVar("workspace", default=None)
    pool = WarmWorkers(max_workers=2, idle_seconds=30)

    async def go() -> weakref.ref[Workspace]:
        workspace = Workspace()
        var.set(workspace)
        result = Workspace()
        assert await pool.run(lambda: var.get()) is workspace
        assert await pool.run(lambda: result) is result
        var.set(None)
        return weakref.ref(workspace)

    gone = asyncio.run(go())
    gc.collect()
    assert gone() is None
    assert pool.threads >= 1  # the worker is still there, warm, waiting


# ---- owners: a fair share of the threads ------------------------------------------------------


def _blocked(pool: WarmWorkers, owner: str, release: threading.Event, started: threading.Semaphore) -> Any:
    """A call of `owner` that holds its thread until `release`."""
    from toolroute._workers import working_for

    def hold() -> str:
        started.release()
        release.wait(30)
        return owner

    async def call() -> str:
        with working_for(owner):
            return await pool.run(hold)

    return call()


def test_an_owner_holding_no_thread_is_served_while_the_others_hold_them_all() -> None:
    """Five tenants each within their own limit (8 calls) hold all forty threads: a sixth
    tenant's call still runs at once, on a thread started beyond the pool for it."""
    from toolroute._workers import working_for

    pool = WarmWorkers(max_workers=40, share=8)
    release, started = threading.Event(), threading.Semaphore(0)

    async def main() -> tuple[str, bool]:
        held = [asyncio.ensure_future(_blocked(pool, f"t{n}", release, started)) for n in range(5) for _ in range(8)]
        for _ in range(40):
            assert await asyncio.to_thread(started.acquire, True, 20)
        assert pool.threads == 40
        with working_for("victim"):
            answer = await asyncio.wait_for(pool.run(lambda: "served"), 20)
        still_held = not any(task.done() for task in held)  # answered before any of theirs ended
        release.set()
        await asyncio.gather(*held)
        return answer, still_held

    assert asyncio.run(main()) == ("served", True)


def test_an_owner_waits_for_its_own_threads_never_for_the_others() -> None:
    """Over its share, an owner's next call waits in its own queue, even with threads free;
    another owner's call runs at once meanwhile."""
    from toolroute._workers import working_for

    pool = WarmWorkers(max_workers=40, share=2)
    release, started = threading.Event(), threading.Semaphore(0)

    async def main() -> None:
        held = [asyncio.ensure_future(_blocked(pool, "greedy", release, started)) for _ in range(2)]
        for _ in range(2):
            assert await asyncio.to_thread(started.acquire, True, 20)
        with working_for("greedy"):
            third = asyncio.ensure_future(pool.run(lambda: "third"))
        await asyncio.sleep(0.2)
        assert not third.done() and pool.queued("greedy") == 1 and pool.holding("greedy") == 2
        with working_for("other"):
            assert await asyncio.wait_for(pool.run(lambda: "other"), 20) == "other"
        release.set()
        assert await asyncio.wait_for(third, 20) == "third"
        await asyncio.gather(*held)

    asyncio.run(main())


def test_work_its_caller_abandoned_still_counts_as_its_owners() -> None:
    """A cancelled call's function runs on (a thread cannot be stopped): its owner cannot pile
    up more of them than its share by cancelling and calling again. And work cancelled while it
    waited in the queue never runs."""
    from toolroute._workers import working_for

    pool = WarmWorkers(max_workers=40, share=2)
    release, started = threading.Event(), threading.Semaphore(0)
    ran: list[str] = []

    async def main() -> None:
        held = [asyncio.ensure_future(_blocked(pool, "leaver", release, started)) for _ in range(2)]
        for _ in range(2):
            assert await asyncio.to_thread(started.acquire, True, 20)
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        assert pool.holding("leaver") == 2  # abandoned, still running
        with working_for("leaver"):
            queued = asyncio.ensure_future(pool.run(lambda: ran.append("queued")))
            later = asyncio.ensure_future(pool.run(lambda: ran.append("later") or "later"))
        await asyncio.sleep(0.2)
        assert pool.queued("leaver") == 2 and ran == []
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        assert await asyncio.wait_for(later, 20) == "later"
        assert ran == ["later"]  # the cancelled one never ran

    asyncio.run(main())


def test_a_freed_thread_goes_to_the_owner_holding_fewest() -> None:
    """With every thread held, queued work is taken by the owner holding the fewest threads
    (taking turns on a tie), not in arrival order: a flood queued first does not starve a
    later, smaller owner."""
    from toolroute._workers import working_for

    pool = WarmWorkers(max_workers=4, share=4, ceiling=4)
    release, started = threading.Event(), threading.Semaphore(0)
    order: list[str] = []

    async def main() -> None:
        held = [asyncio.ensure_future(_blocked(pool, "flood", release, started)) for _ in range(3)]
        held.append(asyncio.ensure_future(_blocked(pool, "small", release, started)))
        for _ in range(4):
            assert await asyncio.to_thread(started.acquire, True, 20)
        with working_for("flood"):
            floods = [asyncio.ensure_future(pool.run(lambda: order.append("flood"))) for _ in range(3)]
        await asyncio.sleep(0.05)
        with working_for("small"):
            small = asyncio.ensure_future(pool.run(lambda: order.append("small")))
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.wait_for(asyncio.gather(*held, *floods, small), 20)

    asyncio.run(main())
    assert order.index("small") < 2, order  # served among the first two freed threads


def test_threads_stay_under_the_ceiling_whatever_the_owners() -> None:
    pool = WarmWorkers(max_workers=2, share=1, ceiling=3)
    release, started = threading.Event(), threading.Semaphore(0)

    async def main() -> None:
        held = [asyncio.ensure_future(_blocked(pool, f"o{n}", release, started)) for n in range(5)]
        for _ in range(3):
            assert await asyncio.to_thread(started.acquire, True, 20)
        await asyncio.sleep(0.2)
        assert pool.threads == 3 and sum(task.done() for task in held) == 0
        release.set()
        assert sorted(await asyncio.wait_for(asyncio.gather(*held), 20)) == [f"o{n}" for n in range(5)]

    asyncio.run(main())
    assert pool.threads <= 2  # the threads started beyond the pool ended with their work
