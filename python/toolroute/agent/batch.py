"""Running a model's batch of tool calls.

The batch is cut, in the model's order, into runs of consecutive read-only calls (run
concurrently) separated by side-effecting calls (each run alone). So a read placed after a
write sees the write, a write never overlaps anything, and results come back in the model's
order. Before each call the approval policy is consulted; failures of every kind become results.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.to_thread

from toolroute._sync import run_coroutine_sync
from toolroute._twins import Body, Step, run_async, run_sync
from toolroute.agent.capture import ResultSink
from toolroute.agent.executor import (
    RouterToolExecutor,
    SchedulingHints,
    ToolExecutor,
    TraceableToolExecutor,
    error_result,
)
from toolroute.agent.policy import ApprovalPolicy, Approver, check_approval, safe_policy
from toolroute.agent.retry import RetryPolicy
from toolroute.agent.telemetry import ToolTelemetry
from toolroute.agent.types import AgentToolCall, AgentToolResult
from toolroute.checkpoints import Checkpoint, WorkspaceCheckpoints
from toolroute.codemode import InnerCaller, InnerReply, inner_calls_through, not_callable
from toolroute.diagnostics import diagnostics_batch
from toolroute.errors import ToolNotFoundError, ToolTimeoutError
from toolroute.router import ToolRouter
from toolroute.types import ToolTraits

log = logging.getLogger("toolroute.agent")
CallLike = AgentToolCall | Mapping[str, Any]


def as_call(item: CallLike, index: int) -> AgentToolCall:
    """An `AgentToolCall` from ours, an OpenAI `tool_calls` item, an Anthropic `tool_use` block or
    `{name, arguments, call_id}`; a missing call id becomes `call_<index>`."""
    if isinstance(item, AgentToolCall):
        call = item
    elif isinstance(item, Mapping):
        if "function" in item:
            call = AgentToolCall.from_openai(item)
        elif item.get("type") == "tool_use":
            call = AgentToolCall.from_anthropic(item)
        else:
            call = AgentToolCall.from_dict(item)
    else:
        raise TypeError(f"expected an AgentToolCall or a mapping, got {type(item).__name__}")
    return call if call.call_id else call.with_call_id(f"call_{index}")


@dataclass(frozen=True)
class PlannedCall:
    index: int  # position in the model's batch
    call: AgentToolCall
    traits: ToolTraits
    kind: str | None
    timeout: float | None = None  # seconds per attempt
    blocking: bool = False  # no deadline and a sync target: may run via `execute` in any thread


class ToolCallRunner:
    """Runs batches of tool calls against one executor (a `ToolRouter` is wrapped for you).

    - `policy` (default `safe_policy()`) is consulted before each call; `approver` answers its
      "ask" decisions (without one, "ask" fails closed as a denial the model reads).
    - `timeout` / `timeouts[name]`: seconds per attempt; a timed-out call is abandoned.
    - `retry`: backoff for tools declared idempotent; other tools run exactly once.
    - `read_only_override(call)`: True/False overrides a tool's declared side effects for
      scheduling (e.g. a host that proves a bash command harmless); None keeps the declaration.
    - `sinks`: `IoCapture`, `JsonlTraceStore` or any `ResultSink`, fed as each call finishes.
    - `checkpoints` (e.g. `context.checkpoints`): a checkpoint of the workspace is taken before
      each batch that has a call not declared read-only (`last_checkpoint`), so the host can
      rewind the batch's changes, a command's included.
    """

    def __init__(
        self,
        executor: ToolExecutor | ToolRouter,
        *,
        policy: ApprovalPolicy | None = None,
        approver: Approver | None = None,
        timeout: float | None = None,
        timeouts: Mapping[str, float] | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = None,
        sinks: Sequence[ResultSink] = (),
        telemetry: ToolTelemetry | None = None,
        read_only_override: Callable[[AgentToolCall], bool | None] | None = None,
        user_id: str | None = None,
        checkpoints: WorkspaceCheckpoints | None = None,
    ) -> None:
        if max_concurrency is None:
            # Parallel groups are mostly quick file work sharing the GIL: a few more lanes than
            # cores overlap I/O without drowning the machine in thread switches.
            max_concurrency = min(8, (os.cpu_count() or 1) + 2)
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.executor: ToolExecutor = (
            RouterToolExecutor(executor, user_id=user_id) if isinstance(executor, ToolRouter) else executor
        )
        self.policy: ApprovalPolicy = policy if policy is not None else safe_policy()
        self.approver = approver
        self.timeout = timeout
        self.timeouts = dict(timeouts or {})
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self.sinks = tuple(sinks)
        self.telemetry = telemetry or ToolTelemetry()
        self.read_only_override = read_only_override
        self.checkpoints = checkpoints
        self.last_checkpoint: Checkpoint | None = None
        # Protocol isinstance checks are slow: decide once.
        self._traceable = isinstance(self.executor, TraceableToolExecutor)
        self._has_hints = isinstance(self.executor, SchedulingHints)
        blocking = getattr(self.executor, "blocking", None)
        self._executor_blocking: Callable[[str], bool] | None = blocking if callable(blocking) else None

    # ---- planning --------------------------------------------------------------------------

    def _declared(self, name: str) -> tuple[ToolTraits, str | None, bool]:
        """What the executor knows about a tool: its traits, its kind, whether it is blocking."""
        traits = ToolTraits()
        if self._has_hints:
            try:
                traits = self.executor.traits(name)  # type: ignore[attr-defined]
            except Exception:  # unknown to the executor: schedule it as side-effecting
                log.debug("traits(%r) failed; treating the tool as side-effecting", name, exc_info=True)
        blocking = False
        if self._executor_blocking is not None:
            try:
                blocking = bool(self._executor_blocking(name))
            except Exception:
                blocking = False
        return traits, self._kind(name), blocking

    def _kind(self, name: str) -> str | None:
        kind = getattr(self.executor, "kind", None)
        try:
            return kind(name) if callable(kind) else None
        except Exception:
            return None

    def plan(self, calls: Iterable[CallLike]) -> list[list[PlannedCall]]:
        """The execution groups, in order: a group of several calls runs concurrently."""
        groups: list[list[PlannedCall]] = []
        declared: dict[str, tuple[ToolTraits, str | None, bool]] = {}  # a batch repeats names
        for index, item in enumerate(calls):
            call = as_call(item, index)
            if call.name not in declared:
                declared[call.name] = self._declared(call.name)
            traits, kind, blocking = declared[call.name]
            if self.read_only_override is not None:
                verdict = self.read_only_override(call)
                if verdict is not None:
                    traits = replace(traits, read_only=bool(verdict))
            timeout = self.timeouts.get(call.name, self.timeout)
            planned = PlannedCall(index, call, traits, kind, timeout, blocking and timeout is None)
            if planned.traits.read_only and groups and groups[-1][-1].traits.read_only:
                groups[-1].append(planned)
            else:
                groups.append([planned])
        return groups

    # ---- running ---------------------------------------------------------------------------

    def run(self, calls: Iterable[CallLike]) -> list[AgentToolResult]:
        """Synchronous `arun` (works from inside a running event loop too)."""
        batch = list(calls)
        # The loop is ours alone, so a serial blocking call may run on it without a thread hop.
        return run_coroutine_sync(lambda: self._arun(batch, own_loop=True))

    async def arun(self, calls: Iterable[CallLike]) -> list[AgentToolResult]:
        """Run the batch; one result per call, in the model's order."""
        return await self._arun(calls, own_loop=False)

    async def _arun(self, calls: Iterable[CallLike], *, own_loop: bool) -> list[AgentToolResult]:
        groups = self.plan(calls)
        if self.checkpoints is not None and any(not p.traits.read_only for g in groups for p in g):
            names = sorted({p.call.name for g in groups for p in g})
            self.last_checkpoint = await anyio.to_thread.run_sync(self.checkpoints.take, f"before {', '.join(names)}")
        with diagnostics_batch():  # each changed file is checked once in the batch
            return await self._run_groups(groups, own_loop=own_loop)

    async def _run_groups(self, groups: list[list[PlannedCall]], *, own_loop: bool) -> list[AgentToolResult]:
        results: dict[int, AgentToolResult] = {}
        limiter = anyio.CapacityLimiter(self.max_concurrency)
        for group in groups:
            approved = []
            for planned in group:  # approvals are asked one at a time, in the model's order
                refusal = await check_approval(planned.call, self.policy, self.approver)
                if refusal is None:
                    approved.append(planned)
                else:
                    results[planned.index] = await self._finish(planned, refusal)
            if len(approved) == 1:
                only = approved[0]
                if own_loop and only.blocking:
                    results[only.index] = self._execute_blocking(only)
                else:
                    results[only.index] = await self._execute(only)
            elif approved:
                await self._run_group(approved, limiter, results, own_loop)
        return [results[i] for i in sorted(results)]

    async def _run_group(
        self,
        group: list[PlannedCall],
        limiter: anyio.CapacityLimiter,
        results: dict[int, AgentToolResult],
        own_loop: bool,
    ) -> None:
        """Blocking calls without a deadline go to worker lanes (one thread hop per lane, not per
        call: hops cost more than a quick read); the others are tasks of their own."""
        queue = deque(p for p in group if p.blocking)
        lanes = min(self.max_concurrency, len(queue))
        if own_loop and len(queue) == len(group):
            self._drain_here(queue, lanes, results)
            return
        async with anyio.create_task_group() as tg:
            for _ in range(lanes):
                tg.start_soon(self._run_lane, queue, limiter, results)
            for planned in group:
                if not planned.blocking:
                    tg.start_soon(self._execute_limited, planned, limiter, results)

    def _lane(self, queue: deque[PlannedCall], results: dict[int, AgentToolResult], stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                planned = queue.popleft()  # deque pops are atomic across threads
            except IndexError:
                return
            # a fresh copy per call, so nothing one call sets leaks into the next
            results[planned.index] = contextvars.copy_context().run(self._execute_blocking, planned)

    def _drain_here(self, queue: deque[PlannedCall], lanes: int, results: dict[int, AgentToolResult]) -> None:
        """On a loop nobody else uses, this thread is one of the lanes instead of idling."""
        stop = threading.Event()
        helpers = [
            _lane_pool().submit(contextvars.copy_context().run, self._lane, queue, results, stop)
            for _ in range(lanes - 1)
        ]
        try:
            self._lane(queue, results, stop)
        finally:
            stop.set()  # after an error here, helpers finish their current call and stop
            for helper in helpers:
                helper.result()

    async def _run_lane(
        self, queue: deque[PlannedCall], limiter: anyio.CapacityLimiter, results: dict[int, AgentToolResult]
    ) -> None:
        stop = threading.Event()
        async with limiter:
            try:
                await anyio.to_thread.run_sync(self._lane, queue, results, stop, abandon_on_cancel=True)
            finally:
                stop.set()  # cancelled: the lane finishes its current call and takes no more

    async def _execute_limited(
        self, planned: PlannedCall, limiter: anyio.CapacityLimiter, results: dict[int, AgentToolResult]
    ) -> None:
        async with limiter:
            results[planned.index] = await self._execute(planned)

    # ---- one call: attempts, retries, trace, span, sinks ---------------------------------------

    def _with_trace(self, result: AgentToolResult) -> AgentToolResult:
        # spec 11.1: read the side channel in the same thread/task, right after the execution
        if result.trace is None and not result.is_error and self._traceable:
            trace = self.executor.last_trace()  # type: ignore[attr-defined]
            if trace is not None:
                return replace(result, trace=trace)
        return result

    def _completed(
        self, planned: PlannedCall, result: AgentToolResult, started: float, attempt: int
    ) -> AgentToolResult:
        return self._annotate(planned, result, duration=time.perf_counter() - started, attempts=attempt)

    async def _execute(self, planned: PlannedCall) -> AgentToolResult:
        return await run_async(self._executing(planned))

    def _execute_blocking(self, planned: PlannedCall) -> AgentToolResult:
        """`_execute` for a blocking call with no deadline, run in the current thread."""
        return run_sync(self._executing(planned))

    def _executing(self, planned: PlannedCall) -> Body[AgentToolResult]:
        """One call, written once: attempts and retries in a span, then the sinks. The attempt,
        the pause between attempts and the sinks are the twinned steps."""
        with self.telemetry.span(planned.call, planned.kind) as finish:
            started, attempt = time.perf_counter(), 1
            result = yield Step(self._attempt_blocking, self._attempt, (planned,))
            while planned.traits.idempotent and self.retry.should_retry(result, attempt):
                yield Step(time.sleep, anyio.sleep, (self.retry.delay(attempt),))
                attempt += 1
                result = yield Step(self._attempt_blocking, self._attempt, (planned,))
            result = self._completed(planned, result, started, attempt)
            finish(result)
        yield Step(self._record_all, self._emit, (planned.call, result))
        return result

    def _attempt_blocking(self, planned: PlannedCall) -> AgentToolResult:
        started = time.perf_counter()
        try:
            with inner_calls_through(self._inner_caller(planned.call)):
                return self._with_trace(self.executor.execute(planned.call))
        except Exception as exc:  # an executor that broke its contract still yields a result
            return error_result(planned.call, exc, time.perf_counter() - started)

    async def _attempt(self, planned: PlannedCall) -> AgentToolResult:
        call = planned.call
        timeout = planned.timeout
        started = time.perf_counter()
        result: AgentToolResult | None = None
        with anyio.move_on_after(timeout), inner_calls_through(self._inner_caller(call)):
            try:
                result = self._with_trace(await self.executor.aexecute(call))
            except Exception as exc:
                return error_result(call, exc, time.perf_counter() - started)
        if result is None:
            return AgentToolResult.failure(call, ToolTimeoutError.__name__, self._timeout_message(planned, timeout))
        return result

    def _inner_caller(self, outer: AgentToolCall) -> InnerCaller:
        """How a code tool run by this call sends its program's calls: each is a call of this
        runner's, as if the model had made it (the policy and approver decide it, the sinks and
        telemetry record it), with the call id `<outer id>.<n>`."""
        numbers = itertools.count(1)

        def call(name: str, arguments: Mapping[str, Any], callable_: bool) -> InnerReply:
            inner = AgentToolCall(name=name, arguments=dict(arguments), call_id=f"{outer.call_id}.{next(numbers)}")
            if callable_:
                result = self.run([inner])[0]
            else:  # refused before any policy: recorded as the model's own unknown name would be
                result = AgentToolResult.failure(inner, ToolNotFoundError.__name__, not_callable(name))
                self._record_all(inner, result)
            if not result.is_error:
                return InnerReply(True, result.output)
            kind = result.error_type or "ToolError"
            return InnerReply(False, result.output.removeprefix(f"Error ({kind}): "), kind)

        return call

    @staticmethod
    def _timeout_message(planned: PlannedCall, timeout: float | None) -> str:
        message = f"tool {planned.call.name!r} did not finish within {timeout:g}s and was abandoned"
        if not planned.traits.read_only:
            message += "; it may still be running, so its side effects may still happen: check before calling again"
        return message

    @staticmethod
    def _annotate(planned: PlannedCall, result: AgentToolResult, **changes: Any) -> AgentToolResult:
        """Scheduling facts for audit and replay, beside whatever the executor recorded."""
        facts = {
            "index": planned.index,
            "kind": planned.kind,
            "read_only": planned.traits.read_only,
            "idempotent": planned.traits.idempotent,
        }
        return replace(result, metadata={**result.metadata, **facts}, **changes)

    async def _finish(self, planned: PlannedCall, refusal: AgentToolResult) -> AgentToolResult:
        result = self._annotate(planned, refusal)
        with self.telemetry.span(planned.call, planned.kind) as finish:
            finish(result)
        await self._emit(planned.call, result)
        return result

    def _record_all(self, call: AgentToolCall, result: AgentToolResult) -> None:
        for sink in self.sinks:
            self._record(sink, call, result)

    async def _emit(self, call: AgentToolCall, result: AgentToolResult) -> None:
        for sink in self.sinks:
            if getattr(sink, "blocking", False):
                await anyio.to_thread.run_sync(self._record, sink, call, result)
            else:
                self._record(sink, call, result)

    @staticmethod
    def _record(sink: ResultSink, call: AgentToolCall, result: AgentToolResult) -> None:
        try:
            sink.record(call, result)
        except Exception:  # a broken sink must not take the batch down
            log.warning("result sink %r failed for call %s", sink, call.call_id, exc_info=True)


@functools.cache
def _lane_pool() -> ThreadPoolExecutor:
    """Helper lanes for `run()`; threads start on demand. A busy pool only lowers the overlap:
    the calling thread drains the queue itself, so a batch never waits on another's lanes."""
    return ThreadPoolExecutor(max_workers=32, thread_name_prefix="toolroute-lane")


def run_tool_calls(
    calls: Iterable[CallLike], executor: ToolExecutor | ToolRouter, **options: Any
) -> list[AgentToolResult]:
    """Run a model's batch of tool calls; `options` are `ToolCallRunner`'s."""
    return ToolCallRunner(executor, **options).run(calls)


async def arun_tool_calls(
    calls: Iterable[CallLike], executor: ToolExecutor | ToolRouter, **options: Any
) -> list[AgentToolResult]:
    return await ToolCallRunner(executor, **options).arun(calls)
