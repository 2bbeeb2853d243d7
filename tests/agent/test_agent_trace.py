"""last_trace() per thread and per task under 100 parallel calls; traces flow into results and
IoCapture."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from _agent_helpers import BARRIER_TIMEOUT, make_workspace

from toolroute import ToolOutput, ToolRouter, function_tool
from toolroute.agent import (
    AgentToolCall,
    AgentToolResult,
    IoCapture,
    RouterToolExecutor,
    TraceableToolExecutor,
    TraceSlot,
    run_tool_calls,
)

CALLS = 100
GROUP = 4  # calls released together inside the tool, and again before reading last_trace()


def traced_router(tmp_path: Path, inside: threading.Barrier) -> ToolRouter:
    router = ToolRouter()

    @function_tool(name="traced", read_only=True)
    def traced(i: int) -> ToolOutput:
        (tmp_path / f"{i}.txt").write_text(str(i))
        inside.wait()
        return ToolOutput(f"done {i}", trace={"i": i, "file": f"{i}.txt"})

    router.register(traced)
    return router


def run_threads(executor: Any) -> list[tuple[int, Any, Any]]:
    """100 calls on 8 threads sharing one executor; between each execution and its
    last_trace() read, GROUP - 1 other executions complete (the second barrier)."""
    after = threading.Barrier(GROUP, timeout=BARRIER_TIMEOUT)

    def one(i: int) -> tuple[int, Any, Any]:
        result = executor.execute(AgentToolCall("traced", json.dumps({"i": i}), f"c{i}"))
        after.wait()
        return i, result.trace, executor.last_trace()

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, range(CALLS)))


def test_last_trace_is_per_thread_under_100_parallel_calls(tmp_path: Path) -> None:
    router = traced_router(tmp_path, threading.Barrier(GROUP, timeout=BARRIER_TIMEOUT))
    executor = RouterToolExecutor(router)
    assert isinstance(executor, TraceableToolExecutor)
    seen = run_threads(executor)
    assert len(seen) == CALLS
    for i, trace, last in seen:
        assert trace == {"i": i, "file": f"{i}.txt"}
        assert last == trace


class SharedAttributeExecutor(RouterToolExecutor):
    """The bug the contract forbids: one attribute shared by every thread."""

    def execute(self, call: AgentToolCall) -> AgentToolResult:
        result = super().execute(call)
        self.shared = result.trace
        return result

    def last_trace(self) -> Any:
        return self.shared


def test_the_parallel_check_catches_a_shared_attribute(tmp_path: Path) -> None:
    router = traced_router(tmp_path, threading.Barrier(GROUP, timeout=BARRIER_TIMEOUT))
    seen = run_threads(SharedAttributeExecutor(router))
    assert sum(1 for _, trace, last in seen if last != trace) > 0


@pytest.mark.anyio
async def test_last_trace_is_per_task_under_100_concurrent_tasks() -> None:
    router = ToolRouter()
    arrived = 0
    all_inside = anyio.Event()

    @function_tool(name="async_traced", read_only=True)
    async def async_traced(i: int) -> ToolOutput:
        nonlocal arrived
        arrived += 1
        if arrived == CALLS:
            all_inside.set()
        await all_inside.wait()  # every one of the 100 is mid-execution at once
        return ToolOutput(str(i), trace={"task": i})

    router.register(async_traced)
    executor = RouterToolExecutor(router)
    done = 0
    all_done = anyio.Event()
    seen: dict[int, Any] = {}

    async def one(i: int) -> None:
        nonlocal done
        await executor.aexecute(AgentToolCall("async_traced", {"i": i}, f"t{i}"))
        done += 1
        if done == CALLS:
            all_done.set()
        await all_done.wait()  # all 100 traces were set before anyone reads
        seen[i] = executor.last_trace()

    with anyio.fail_after(BARRIER_TIMEOUT):
        async with anyio.create_task_group() as tg:
            for i in range(CALLS):
                tg.start_soon(one, i)
    assert seen == {i: {"task": i} for i in range(CALLS)}


def test_a_failed_call_clears_the_threads_last_trace(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    ws.path("f").write_text("x")
    executor = RouterToolExecutor(ws.router)
    executor.execute(AgentToolCall("read_note", '{"path": "f"}'))
    executor.execute(AgentToolCall("meeting_read", '{"path": "f"}'))  # fails: no barrier here
    assert executor.last_trace() is None


class SideChannelExecutor:
    """A custom TraceableToolExecutor that reports its trace only through last_trace()."""

    def __init__(self) -> None:
        self._slot = TraceSlot("side_channel")

    def execute(self, call: AgentToolCall) -> AgentToolResult:
        args = call.parsed_arguments() or {}
        self._slot.set({"hits": [args.get("q", "")] * 2, "reranked": True})
        return AgentToolResult(call.name, call.call_id, f"context for {args.get('q')}")

    async def aexecute(self, call: AgentToolCall) -> AgentToolResult:
        return self.execute(call)

    def last_trace(self) -> Any:
        return self._slot.get()


def test_runner_reads_last_trace_into_the_result_and_capture() -> None:
    capture = IoCapture()
    calls = [AgentToolCall("knowledge_search", {"q": f"q{i}"}, f"k{i}") for i in range(3)]
    results = run_tool_calls(calls, SideChannelExecutor(), sinks=[capture])
    assert [r.trace for r in results] == [{"hits": [f"q{i}", f"q{i}"], "reranked": True} for i in range(3)]
    assert [r.output for r in results] == ["context for q0", "context for q1", "context for q2"]
    assert len(capture) == 3
    record = capture.for_call("k1")
    assert record is not None
    assert record.input == calls[1]
    assert record.output == "context for q1"
    assert record.trace == {"hits": ["q1", "q1"], "reranked": True}


def test_io_capture_records_failures_too(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    capture = IoCapture()
    run_tool_calls([AgentToolCall("explode", '{"message": "no"}', "e1")], ws.router, sinks=[capture])
    (record,) = capture.records
    assert record.result.is_error and "RuntimeError: no" in record.output and record.trace is None
