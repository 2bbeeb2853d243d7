"""Running a model's batch of tool calls.

The batch is cut, in the model's order, into runs of consecutive read-only calls (run
concurrently) separated by side-effecting calls (each run alone). So a read placed after a
write sees the write, a write never overlaps anything, and results come back in the model's
order. Before each call the approval policy is consulted; failures of every kind become results.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from toolroute._sync import run_coroutine_sync
from toolroute.agent.capture import ResultSink
from toolroute.agent.executor import (
    RouterToolExecutor,
    SchedulingHints,
    ToolExecutor,
    TraceableToolExecutor,
    error_result,
)
from toolroute.agent.policy import (
    ApprovalAnswer,
    ApprovalPolicy,
    ApprovalRequest,
    Approver,
    Decision,
    Verdict,
    safe_policy,
)
from toolroute.agent.retry import RetryPolicy
from toolroute.agent.telemetry import ToolTelemetry
from toolroute.agent.types import DENIED, INVALID_CALL, REJECTED, AgentToolCall, AgentToolResult
from toolroute.errors import ToolTimeoutError
from toolroute.registration import ToolTraits
from toolroute.router import ToolRouter

log = logging.getLogger("toolroute.agent")
T = TypeVar("T")
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


async def _resolve(value: T | Awaitable[T]) -> T:
    """A sync hook's value, or an async hook's awaited value."""
    if inspect.isawaitable(value):
        return await value
    return value


class ToolCallRunner:
    """Runs batches of tool calls against one executor (a `ToolRouter` is wrapped for you).

    - `policy` (default `safe_policy()`) is consulted before each call; `approver` answers its
      "ask" decisions (without one, "ask" fails closed as a denial the model reads).
    - `timeout` / `timeouts[name]`: seconds per attempt; a timed-out call is abandoned.
    - `retry`: backoff for tools declared idempotent; other tools run exactly once.
    - `read_only_override(call)`: True/False overrides a tool's declared side effects for
      scheduling (e.g. a host that proves a bash command harmless); None keeps the declaration.
    - `sinks`: `IoCapture`, `JsonlTraceStore` or any `ResultSink`, fed as each call finishes.
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
        max_concurrency: int = 8,
        sinks: Sequence[ResultSink] = (),
        telemetry: ToolTelemetry | None = None,
        read_only_override: Callable[[AgentToolCall], bool | None] | None = None,
        user_id: str | None = None,
    ) -> None:
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

    # ---- planning --------------------------------------------------------------------------

    def _traits(self, call: AgentToolCall) -> ToolTraits:
        traits = ToolTraits()
        if isinstance(self.executor, SchedulingHints):
            try:
                traits = self.executor.traits(call.name)
            except Exception:  # unknown to the executor: schedule it as side-effecting
                log.debug("traits(%r) failed; treating the tool as side-effecting", call.name, exc_info=True)
        if self.read_only_override is not None:
            verdict = self.read_only_override(call)
            if verdict is not None:
                traits = replace(traits, read_only=bool(verdict))
        return traits

    def _kind(self, name: str) -> str | None:
        kind = getattr(self.executor, "kind", None)
        try:
            return kind(name) if callable(kind) else None
        except Exception:
            return None

    def plan(self, calls: Iterable[CallLike]) -> list[list[PlannedCall]]:
        """The execution groups, in order: a group of several calls runs concurrently."""
        groups: list[list[PlannedCall]] = []
        for index, item in enumerate(calls):
            call = as_call(item, index)
            planned = PlannedCall(index, call, self._traits(call), self._kind(call.name))
            if planned.traits.read_only and groups and groups[-1][-1].traits.read_only:
                groups[-1].append(planned)
            else:
                groups.append([planned])
        return groups

    # ---- running ---------------------------------------------------------------------------

    def run(self, calls: Iterable[CallLike]) -> list[AgentToolResult]:
        """Synchronous `arun` (works from inside a running event loop too)."""
        batch = list(calls)
        return run_coroutine_sync(lambda: self.arun(batch))

    async def arun(self, calls: Iterable[CallLike]) -> list[AgentToolResult]:
        """Run the batch; one result per call, in the model's order."""
        groups = self.plan(calls)
        results: dict[int, AgentToolResult] = {}
        limiter = anyio.CapacityLimiter(self.max_concurrency)
        for group in groups:
            approved = []
            for planned in group:  # approvals are asked one at a time, in the model's order
                refusal = await self._approve(planned.call)
                if refusal is None:
                    approved.append(planned)
                else:
                    results[planned.index] = await self._finish(planned, refusal)
            if len(approved) == 1:
                results[approved[0].index] = await self._execute(approved[0])
            elif approved:
                async with anyio.create_task_group() as tg:
                    for planned in approved:
                        tg.start_soon(self._execute_limited, planned, limiter, results)
        return [results[i] for i in sorted(results)]

    async def _execute_limited(
        self, planned: PlannedCall, limiter: anyio.CapacityLimiter, results: dict[int, AgentToolResult]
    ) -> None:
        async with limiter:
            results[planned.index] = await self._execute(planned)

    async def _approve(self, call: AgentToolCall) -> AgentToolResult | None:
        """None when the call may run, else the refusal the model reads."""
        if not call.name.strip():
            return AgentToolResult.failure(call, INVALID_CALL, "tool name is required")
        try:
            decision: Decision = await _resolve(self.policy.decide(call))
        except Exception as exc:  # fail closed
            return AgentToolResult.failure(call, DENIED, f"the approval policy failed ({type(exc).__name__}: {exc})")
        if decision.verdict is Verdict.ALLOW:
            return None
        if decision.verdict is Verdict.DENY:
            return AgentToolResult.failure(
                call, DENIED, f"tool call denied by policy: {decision.reason or 'no reason'}"
            )
        if self.approver is None:
            return AgentToolResult.failure(
                call, DENIED, f"this call needs approval and the host has no approver: {decision.reason}"
            )
        try:
            answer: ApprovalAnswer = await _resolve(self.approver(ApprovalRequest(call, decision.reason)))
        except Exception as exc:
            return AgentToolResult.failure(
                call, REJECTED, f"approval could not be obtained ({type(exc).__name__}: {exc})"
            )
        if answer is True or (isinstance(answer, Decision) and answer.verdict is Verdict.ALLOW):
            return None
        reason = answer.reason if isinstance(answer, Decision) and answer.reason else "no reason given"
        return AgentToolResult.failure(call, REJECTED, f"the user did not approve this call: {reason}")

    async def _execute(self, planned: PlannedCall) -> AgentToolResult:
        with self.telemetry.span(planned.call, planned.kind) as finish:
            started = time.perf_counter()
            attempt = 1
            result = await self._attempt(planned)
            while planned.traits.idempotent and self.retry.should_retry(result, attempt):
                await anyio.sleep(self.retry.delay(attempt))
                attempt += 1
                result = await self._attempt(planned)
            result = self._annotate(planned, replace(result, duration=time.perf_counter() - started, attempts=attempt))
            finish(result)
        await self._emit(planned.call, result)
        return result

    async def _attempt(self, planned: PlannedCall) -> AgentToolResult:
        call = planned.call
        timeout = self.timeouts.get(call.name, self.timeout)
        started = time.perf_counter()
        result: AgentToolResult | None = None
        with anyio.move_on_after(timeout):
            try:
                result = await self.executor.aexecute(call)
            except Exception as exc:  # an executor that broke its contract still yields a result
                return error_result(call, exc, time.perf_counter() - started)
            # spec 11.1: read the side channel in the same task, right after the execution
            if result.trace is None and not result.is_error and isinstance(self.executor, TraceableToolExecutor):
                result = replace(result, trace=self.executor.last_trace())
        if result is None:
            return AgentToolResult.failure(call, ToolTimeoutError.__name__, self._timeout_message(planned, timeout))
        return result

    @staticmethod
    def _timeout_message(planned: PlannedCall, timeout: float | None) -> str:
        message = f"tool {planned.call.name!r} did not finish within {timeout:g}s and was abandoned"
        if not planned.traits.read_only:
            message += "; it may still be running, so its side effects may still happen: check before calling again"
        return message

    @staticmethod
    def _annotate(planned: PlannedCall, result: AgentToolResult) -> AgentToolResult:
        """Scheduling facts for audit and replay, beside whatever the executor recorded."""
        facts = {
            "index": planned.index,
            "kind": planned.kind,
            "read_only": planned.traits.read_only,
            "idempotent": planned.traits.idempotent,
        }
        return replace(result, metadata={**result.metadata, **facts})

    async def _finish(self, planned: PlannedCall, refusal: AgentToolResult) -> AgentToolResult:
        result = self._annotate(planned, refusal)
        with self.telemetry.span(planned.call, planned.kind) as finish:
            finish(result)
        await self._emit(planned.call, result)
        return result

    async def _emit(self, call: AgentToolCall, result: AgentToolResult) -> None:
        for sink in self.sinks:
            try:
                if getattr(sink, "blocking", False):
                    await anyio.to_thread.run_sync(sink.record, call, result)
                else:
                    sink.record(call, result)
            except Exception:  # a broken sink must not take the batch down
                log.warning("result sink %r failed for call %s", sink, call.call_id, exc_info=True)


def run_tool_calls(
    calls: Iterable[CallLike], executor: ToolExecutor | ToolRouter, **options: Any
) -> list[AgentToolResult]:
    """Run a model's batch of tool calls; `options` are `ToolCallRunner`'s."""
    return ToolCallRunner(executor, **options).run(calls)


async def arun_tool_calls(
    calls: Iterable[CallLike], executor: ToolExecutor | ToolRouter, **options: Any
) -> list[AgentToolResult]:
    return await ToolCallRunner(executor, **options).arun(calls)
