"""The gateway's loop, run by whoever needs it (`toolroute.mcp.loop`): a synchronous caller runs
it itself when it is free, and the background thread when async work waits, or for a round when
something becomes ready while it has been free a while (it is watched then, not held). These
tests attack the handoffs: parallel callers, work between calls, mixed sync and async callers,
a stop under all of them. Every wait is bounded."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from toolroute.errors import ToolExecutionError
from toolroute.mcp.loop import LoopThread

CALLERS = 8


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    loop = LoopThread("test-loop")
    yield loop
    loop.stop()


def test_parallel_synchronous_callers_run_at_once_not_one_after_another(loop: LoopThread) -> None:
    """Each call waits on the loop until every caller's call has arrived: callers handed to a
    busy loop must run beside the leader's call, or none would ever end (bounded by a timeout
    that fails the test)."""
    arrived = 0
    everyone: asyncio.Event | None = None

    async def meet(n: int) -> int:
        nonlocal arrived, everyone
        if everyone is None:
            everyone = asyncio.Event()
        arrived += 1
        if arrived == CALLERS:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 20)
        return n * n

    results: dict[int, int | BaseException] = {}

    def caller(n: int) -> None:
        try:
            results[n] = loop.run(meet(n))
        except BaseException as exc:
            results[n] = exc

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {n: n * n for n in range(CALLERS)}


def test_many_quick_calls_from_many_threads_and_loops_each_get_their_own_answer(loop: LoopThread) -> None:
    """Sync callers in threads, sync callers inside a running loop of their own, and async
    callers from other loops, all at once: every answer is the caller's own."""

    async def echo(tag: str, i: int) -> str:
        if i % 3 == 0:
            await asyncio.sleep(0)
        if i % 7 == 0:
            await asyncio.sleep(0.001)
        return f"{tag}:{i}"

    wrong: list[str] = []

    def sync_caller(tag: str) -> None:
        for i in range(200):
            got = loop.run(echo(tag, i))
            if got != f"{tag}:{i}":
                wrong.append(got)

    def caller_in_a_loop(tag: str) -> None:
        async def main() -> None:
            for i in range(100):
                got = loop.run(echo(tag, i))  # blocks this loop: it may only wait
                if got != f"{tag}:{i}":
                    wrong.append(got)
            for i in range(100):
                got = await loop.arun(echo(tag + "-async", i))
                if got != f"{tag}-async:{i}":
                    wrong.append(got)

        asyncio.run(main())

    threads = [threading.Thread(target=sync_caller, args=(f"s{n}",)) for n in range(4)]
    threads += [threading.Thread(target=caller_in_a_loop, args=(f"l{n}",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert wrong == []


def test_work_left_on_the_loop_goes_on_after_the_call_returns(loop: LoopThread) -> None:
    """A call that leaves work behind (a server's message arriving after the reply, say) and a
    caller that then makes no further call: the background thread takes the loop over, and the
    work is done. If the loop were only run during calls, it would never be."""
    done = threading.Event()

    async def leave_work() -> None:
        async def later() -> None:
            await asyncio.sleep(0.05)
            done.set()

        asyncio.get_running_loop().create_task(later())

    loop.run(leave_work())
    assert done.wait(20)


def _who_runs() -> int:
    async def ident() -> int:
        return threading.get_ident()

    return ident()


def test_a_call_after_a_quiet_spell_is_run_by_its_caller_not_handed_to_the_background(loop: LoopThread) -> None:
    """Free for longer than LINGER, the loop is only watched: a synchronous caller then finds it
    free and runs it himself, the way an isolated tool call of an agent comes. Each round here
    waits past LINGER first, with work pending on the loop (a timer) and without."""
    me = threading.get_ident()
    pending: list[asyncio.TimerHandle] = []

    async def leave_a_timer() -> None:
        pending.append(asyncio.get_running_loop().call_later(3600, lambda: None))

    loop.run(leave_a_timer())
    for _ in range(5):
        time.sleep(loop.LINGER * 10)
        assert loop.run(_who_runs()) == me
    loop.loop.call_soon_threadsafe(pending[0].cancel)


def test_a_caller_who_takes_a_watched_loop_wakes_the_watch_before_its_call_runs(loop: LoopThread) -> None:
    """Woken only by the loop's descriptors, the watch would wake at the server's reply, in the
    middle of the caller's call, and take the GIL then. The caller wakes it as it takes the loop:
    while its call waits, nobody watches any more."""
    for _ in range(3):
        time.sleep(loop.LINGER * 10)
        assert loop._watching

        async def wait_then_look() -> bool:
            deadline = time.monotonic() + 10
            while loop._watching and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            return loop._watching

        assert loop.run(wait_then_look()) is False


def test_async_work_on_a_watched_loop_is_served_and_then_the_loop_is_free_again(loop: LoopThread) -> None:
    """An async caller's work on a loop nobody runs wakes the watch at once; once it is done the
    background thread lets the loop go again, so the next synchronous call is its caller's own."""
    time.sleep(loop.LINGER * 10)

    async def echo() -> str:
        await asyncio.sleep(0.01)
        return "async answer"

    started = time.monotonic()
    assert loop.submit(echo()).result(timeout=20) == "async answer"
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 10
    while loop._driver is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert loop._driver is None
    assert loop.run(_who_runs()) == threading.get_ident()


class _Lingering(LoopThread):
    LINGER = 2.0  # long beside any stall of a loaded machine


def test_async_callers_in_quick_succession_find_the_loop_still_held() -> None:
    """Async work done, the background thread holds the loop for LINGER before it watches it:
    a served gateway's next async call (often at once) needs no wake-up of a watch. Then it
    lets go, and a synchronous caller runs it himself."""
    loop = _Lingering("test-loop")
    try:

        async def echo(n: int) -> int:
            await asyncio.sleep(0)
            return n

        for n in range(5):
            assert loop.submit(echo(n)).result(timeout=20) == n
            assert loop._driver == loop._thread.ident  # still held for the next
        deadline = time.monotonic() + 20
        while loop._driver is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert loop._driver is None
        assert loop.run(_who_runs()) == threading.get_ident()
    finally:
        loop.stop()


def test_a_stop_while_the_loop_is_only_watched_ends_the_thread_at_once() -> None:
    """Nothing on the loop, no timer: the watch waits without a timeout, and a stop must still
    end it (the stop writes to the loop's self-pipe)."""
    loop = LoopThread("test-loop")
    loop.run(asyncio.sleep(0))
    time.sleep(loop.LINGER * 10)
    started = time.monotonic()
    loop.stop()
    assert not loop._thread.is_alive()
    assert time.monotonic() - started < 10


def test_async_work_submitted_while_a_caller_runs_the_loop_is_not_left_waiting(loop: LoopThread) -> None:
    """An async caller's call handed over while a synchronous caller runs the loop: when that
    caller lets go, the call is served at once (not after the caller's next call)."""
    started = threading.Event()
    release = threading.Event()

    async def hold() -> None:
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)

    async def slow_echo() -> str:
        await asyncio.sleep(0.2)
        return "async answer"

    holder = threading.Thread(target=loop.run, args=(hold(),))
    holder.start()
    assert started.wait(20)
    future = loop.submit(slow_echo())
    release.set()
    holder.join(20)
    assert future.result(timeout=20) == "async answer"


def test_a_stop_ends_every_waiting_caller_with_an_error_never_a_hang(loop: LoopThread) -> None:
    """Callers leading and following, each in a call that never ends, and a stop from another
    thread: each ends with an error, and the loop refuses later calls."""

    async def forever() -> None:
        await asyncio.sleep(3600)

    errors: list[str] = []

    def caller() -> None:
        try:
            loop.run(forever())
        except ToolExecutionError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    stopper = threading.Thread(target=loop.stop)
    stopper.start()
    for t in [*threads, stopper]:
        t.join(30)
    assert not any(t.is_alive() for t in [*threads, stopper])
    assert len(errors) == CALLERS
    assert all("closed during the call" in e for e in errors)
    assert loop.loop.is_closed()

    async def late() -> None:
        return None

    with pytest.raises(ToolExecutionError, match="gateway is closed"):
        loop.run(late())


def test_a_call_from_inside_a_call_on_the_loop_is_refused_not_deadlocked(loop: LoopThread) -> None:
    """Code running on the loop (in a caller's own run of it, too) that makes a synchronous call
    would wait for itself: it is refused."""

    async def inner() -> int:
        return 1

    async def outer() -> str:
        try:
            loop.run(inner())
        except ToolExecutionError as exc:
            return str(exc)
        return "not refused"

    assert "gateway's own loop" in loop.run(outer())


def test_ctrl_c_while_the_main_thread_runs_the_loop_ends_its_call_and_nothing_else(loop: LoopThread) -> None:
    """SIGINT lands wherever the main thread is, and while it runs the loop that is as likely a
    session's own task as the call: it must cancel the call and raise KeyboardInterrupt from it,
    and every other task on the loop must live on."""
    assert threading.current_thread() is threading.main_thread()
    ticks = 0
    stop_ticking = threading.Event()

    async def start_ticker() -> asyncio.Task[None]:
        async def tick() -> None:
            nonlocal ticks
            while not stop_ticking.is_set():
                ticks += 1
                sum(range(2000))  # Python code for the signal to land in
                await asyncio.sleep(0)

        return asyncio.get_running_loop().create_task(tick())

    cancelled = threading.Event()

    async def long_call() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    ticker = loop.run(start_ticker())
    for _ in range(5):
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            loop.run(long_call())
        assert cancelled.wait(10)
        cancelled.clear()
        assert not ticker.done()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    before = ticks

    async def later() -> int:
        await asyncio.sleep(0.05)
        return ticks

    assert loop.run(later()) > before  # the ticker still runs
    stop_ticking.set()


def test_ctrl_c_during_a_stdio_call_cancels_it_and_keeps_the_session() -> None:
    """The same through a real server over stdio: a Ctrl-C during a slow call raises
    KeyboardInterrupt at once, and the next calls go to the same server process (the session's
    own tasks were not hit)."""
    from _mcp_helpers import demo_stdio

    from toolroute.mcp import McpGateway

    with McpGateway({"demo": demo_stdio("demo")}, eager=True) as gateway:
        pid = gateway.call_tool("pid", {}).text
        for _ in range(3):
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            began = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                gateway.call_tool("slow", {"seconds": 60})
            assert time.monotonic() - began < 30
            assert gateway.call_tool("add", {"a": 2, "b": 3}).text == "5"
            assert gateway.call_tool("pid", {}).text == pid


def test_a_servers_notification_after_a_sync_call_is_heard_without_another_call() -> None:
    """A real stdio server announces a new tool just after answering (`enable_extra`), and the
    caller makes no further call: the gateway still hears it and publishes the tool (the
    background thread took the loop over once the caller let it go)."""
    from _mcp_helpers import demo_stdio

    from toolroute.mcp import McpGateway

    with McpGateway({"demo": demo_stdio("demo")}, eager=True) as gateway:
        heard = threading.Event()
        gateway.on_tools_changed(lambda user_id: heard.set())
        assert gateway.call_tool("enable_extra", {"tool": "late_tool"}).text == "ok"
        assert heard.wait(30)  # no call in between: only the background thread can hear it
        assert gateway.call_tool("late_tool", {}).text == "late_tool ok"


class _Patient(LoopThread):
    LINGER = 3600.0  # the background thread never takes a free loop: callers hold it alone


def test_ctrl_c_after_taking_the_loop_over_before_the_call_has_started_still_cancels_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A follower that takes the loop over runs it with its call only handed over, not yet
    started. A Ctrl-C in that window must still cancel the call once it starts, not let it run
    to its end. The window is made certain: the state of a take-over is set up as `_follow`
    sets it, and the signal lands just before the loop first runs."""
    from toolroute.mcp.loop import _Call

    assert threading.current_thread() is threading.main_thread()
    loop = _Patient("test-loop")
    call: _Call[str] = _Call()

    async def long_call() -> str:
        await asyncio.sleep(30)
        return "ran to its end"

    real_run_forever = loop.loop.run_forever
    signalled: list[bool] = []

    def run_forever() -> None:
        if not signalled:
            signalled.append(True)
            assert call.task is None  # the window: the call is not started yet
            os.kill(os.getpid(), signal.SIGINT)
        real_run_forever()

    monkeypatch.setattr(loop.loop, "run_forever", run_forever)
    with loop._lock:  # taken over, as `_follow` takes it
        assert loop._driver is None
        loop._driver = threading.get_ident()
        loop._drives += 1
    loop._hand_over(call, long_call())
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop._lead(call)
    finally:
        loop.stop()
    assert signalled
    assert call.task is not None and call.task.cancelled()
    assert time.monotonic() - started < 20
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_while_waiting_for_the_thread_that_runs_the_loop_ends_the_call_too(loop: LoopThread) -> None:
    """The main thread may be a follower: the background thread runs the loop (async work is
    on it) and the call was handed to it. A Ctrl-C there raises at once; the call must not
    run on, orphaned."""
    assert threading.current_thread() is threading.main_thread()
    blocker = loop.submit(asyncio.sleep(30))  # async work: the background thread runs the loop
    cancelled = threading.Event()

    async def long_call() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        deadline = time.monotonic() + 10
        while loop._driver is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert loop._driver is not None and loop._driver != threading.get_ident()
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            loop.run(long_call())
        assert cancelled.wait(10)
    finally:
        blocker.cancel()
