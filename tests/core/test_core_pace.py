"""How an async caller runs a sync tool (`_pace.py`, `types.LocalTool.acall`): declared quick,
inline; declared `quick=False`, always on a worker thread; undeclared, on a thread until its runs
prove short, then inline, and back on the thread (needing a longer proof) after a slow run."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute._pace import FIRST_PROOF, INLINE_BUDGET, MAX_PROOF, Pace
from toolroute.builtins import BuiltinRequest, BuiltinTool
from toolroute.types import ToolOutput


def test_the_record_earns_and_loses_inline_runs() -> None:
    pace = Pace()
    for _ in range(FIRST_PROOF - 1):
        pace.ran(INLINE_BUDGET / 10)
    assert not pace.inline
    pace.ran(INLINE_BUDGET / 10)
    assert pace.inline
    pace.ran(INLINE_BUDGET * 10)  # one slow run: back to the thread, a longer proof next time
    assert not pace.inline and pace.needed == 2 * FIRST_PROOF
    for _ in range(2 * FIRST_PROOF - 1):
        pace.ran(0.0)
    assert not pace.inline
    pace.ran(0.0)
    assert pace.inline


@given(st.lists(st.floats(min_value=0, max_value=0.01), max_size=300))
def test_inline_only_after_a_full_streak_within_the_budget(durations: list[float]) -> None:
    pace = Pace()
    streak = 0
    for seconds in durations:
        was_inline, needed = pace.inline, pace.needed
        pace.ran(seconds)
        streak = streak + 1 if seconds <= INLINE_BUDGET else 0
        assert pace.inline == (streak >= needed if seconds <= INLINE_BUDGET else False)
        assert pace.needed <= MAX_PROOF
        if seconds > INLINE_BUDGET and was_inline:
            assert pace.needed == min(2 * needed, MAX_PROOF)


def where(router: ToolRouter, name: str, calls: int) -> list[bool]:
    """For each call, whether it ran on the caller's own (loop) thread."""

    async def main() -> list[bool]:
        loop_thread = threading.current_thread().name
        return [await router.ainvoke(name, {}) == loop_thread for _ in range(calls)]

    return asyncio.run(main())


def test_undeclared_tools_move_inline_and_back() -> None:
    slow = threading.Event()

    @function_tool(name="small")
    def small() -> str:
        if slow.is_set():
            time.sleep(0.01)
        return threading.current_thread().name

    router = ToolRouter(builtins={})
    router.register(small)
    ran_here = where(router, "small", 400)
    assert not any(ran_here[:FIRST_PROOF])  # the first runs are measured on a worker thread
    assert any(ran_here)  # a busy machine may slow some runs, but in 400 the streak is made
    first_inline = ran_here.index(True)
    assert all(ran_here[first_inline:]) or ran_here.count(True) > FIRST_PROOF
    slow.set()  # now each run takes 10 ms: at most one more runs inline
    assert where(router, "small", 5).count(True) <= 1
    assert not any(where(router, "small", 5)[1:])


def test_declared_tools_keep_their_place() -> None:
    @function_tool(name="may_block", quick=False)
    def may_block() -> str:
        return threading.current_thread().name

    @function_tool(name="never_blocks", quick=True)
    def never_blocks() -> str:
        return threading.current_thread().name

    router = ToolRouter(builtins={})
    router.register(may_block)
    router.register(never_blocks)
    assert not any(where(router, "may_block", 3 * FIRST_PROOF))
    assert all(where(router, "never_blocks", 5))


def test_built_ins_never_run_inline(tmp_path: Path) -> None:
    """However short its runs, a built-in stays on the worker thread (a grep over a big tree or
    a command can take long)."""

    class ProbeRequest(BuiltinRequest):
        pass

    probe = BuiltinTool(
        name="probe",
        description="where it runs",
        request_model=ProbeRequest,
        handler=lambda request, ctx: ToolOutput(threading.current_thread().name),
        read_only=True,
    )
    router = ToolRouter(context=BuiltInToolContext(tmp_path), builtins={"probe": probe})
    assert router.traits("probe").quick is False
    assert not any(where(router, "probe", 3 * FIRST_PROOF))
