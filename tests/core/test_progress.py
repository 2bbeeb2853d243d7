"""The progress sink: reports from any thread arrive in order on the session's loop, progress only
increases, and closing waits for what was queued (boundedly), then takes nothing more."""

from __future__ import annotations

import asyncio
import threading

from toolroute.progress import MAX_PENDING, ProgressSink, current_progress, reporting


def test_reports_from_another_thread_arrive_in_order_and_only_increase() -> None:
    got: list[tuple[float, float | None, str | None]] = []

    async def send(progress: float, total: float | None, message: str | None) -> None:
        await asyncio.sleep(0)  # a real send yields: order must survive that
        got.append((progress, total, message))

    async def go() -> None:
        sink = ProgressSink(send)

        def reporter() -> None:
            for i in range(1, 101):
                sink.report(i, 100, f"{i}")
                sink.report(i - 0.5)  # not above the last: dropped

        thread = threading.Thread(target=reporter)
        thread.start()
        await asyncio.to_thread(thread.join)
        await sink.aclose()
        sink.report(1000)  # after close: dropped

    asyncio.run(go())
    assert MAX_PENDING >= 100  # so nothing may be dropped for room
    assert got == [(i, 100, f"{i}") for i in range(1, 101)]


def test_a_failing_send_stops_delivery_without_failing_the_call() -> None:
    calls = 0

    async def send(progress: float, total: float | None, message: str | None) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("client gone")

    async def go() -> None:
        sink = ProgressSink(send)
        for i in range(1, 6):
            sink.report(i)
        await sink.aclose()

    asyncio.run(go())
    assert calls == 1


def test_the_current_sink_is_seen_by_worker_threads_of_the_call_and_not_after() -> None:
    async def go() -> tuple[object, object, object]:
        async def send(progress: float, total: float | None, message: str | None) -> None:
            return None

        sink = ProgressSink(send)
        with reporting(sink):
            inside = await asyncio.to_thread(current_progress)
        return sink, inside, current_progress()

    sink, inside, after = asyncio.run(go())
    assert inside is sink and after is None
