"""Executors: what turns an `AgentToolCall` into an `AgentToolResult`.

`RouterToolExecutor` makes every tool a `ToolRouter` can invoke executable, and turns every error
into a result the model reads (AI4J lets a tool exception abort the whole request instead).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Collection, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread

from toolroute.agent.types import AgentToolCall, AgentToolResult
from toolroute.builtins import ToolOutput
from toolroute.errors import ToolError, ToolExecutionError, ToolNotFoundError
from toolroute.registration import ToolTraits
from toolroute.router import ToolKind, ToolRouter

# The only built-ins that may run beside other calls. AI4J also counts bash as read-only; a
# command can do anything, so here bash (and every other built-in) is side-effecting.
READ_ONLY_BUILTINS = frozenset({"read_file", "glob", "grep"})


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs one call. Implementations must not raise for tool failures: they return `is_error` results."""

    def execute(self, call: AgentToolCall) -> AgentToolResult: ...

    async def aexecute(self, call: AgentToolCall) -> AgentToolResult: ...


@runtime_checkable
class TraceableToolExecutor(ToolExecutor, Protocol):
    """An executor with a structured side channel (spec 11.1).

    `last_trace()` is the trace of the most recent execution *in the current thread or task*, so
    one instance can run many calls in parallel; keep it in a `TraceSlot`, never in an attribute.
    """

    def last_trace(self) -> Any: ...


@runtime_checkable
class SchedulingHints(Protocol):
    """Optional: what an executor knows about a tool's side effects (the batch runner schedules by it)."""

    def traits(self, name: str) -> ToolTraits: ...


class TraceSlot:
    """The "last trace" of one executor, per thread and per asyncio task (a ThreadLocal that also
    separates tasks). A setter in a worker thread or child task does not leak into its caller."""

    def __init__(self, owner: str = "executor") -> None:
        self._var: contextvars.ContextVar[Any] = contextvars.ContextVar(f"toolroute_last_trace_{owner}", default=None)

    def set(self, trace: Any) -> None:
        self._var.set(trace)

    def get(self) -> Any:
        return self._var.get()


def error_result(call: AgentToolCall, exc: BaseException, duration: float = 0.0) -> AgentToolResult:
    """An `is_error` result for `exc`; toolroute's messages are already written for the model."""
    if isinstance(exc, ToolError):
        return AgentToolResult.failure(call, type(exc).__name__, str(exc), duration=duration)
    message = f"tool {call.name!r} failed: {type(exc).__name__}: {exc}"
    return AgentToolResult.failure(call, ToolExecutionError.__name__, message, duration=duration)


class RouterToolExecutor:
    """A `TraceableToolExecutor` over a `ToolRouter`; built-ins fill `trace` with their facts.

    `allowed` limits execution to the names exposed to this request (AI4J's deny-by-default
    `ToolUtilExecutor`); None allows whatever the router can reach.
    """

    def __init__(
        self, router: ToolRouter, *, user_id: str | None = None, allowed: Collection[str] | None = None
    ) -> None:
        self.router = router
        self.user_id = user_id
        self.allowed = None if allowed is None else frozenset(allowed)
        self._trace = TraceSlot(f"router_{id(self)}")

    @classmethod
    def for_request(
        cls,
        router: ToolRouter,
        function_list: Sequence[str] | None = None,
        mcp_server_ids: Sequence[str] | None = None,
        user_id: str | None = None,
    ) -> RouterToolExecutor:
        """An executor limited to exactly what `router.get_all_tools(...)` exposes to this request."""
        tools = router.get_all_tools(function_list, mcp_server_ids, user_id)
        return cls(router, user_id=user_id, allowed=[t["function"]["name"] for t in tools])

    # ---- scheduling hints ----------------------------------------------------------------

    def _route(self, name: str) -> tuple[int, Any] | None:
        self.router.ensure_initialized()
        return self.router.table.resolve(name, self.user_id)

    def kind(self, name: str) -> str | None:
        """ "builtin", "user_mcp", "local_mcp", "function", "global_mcp", or None when unknown."""
        hit = self._route(name)
        return None if hit is None else ToolKind(hit[0]).name.lower()

    def traits(self, name: str) -> ToolTraits:
        hit = self._route(name)
        if hit is not None and hit[0] == ToolKind.BUILTIN and name not in READ_ONLY_BUILTINS:
            return ToolTraits(read_only=False, idempotent=False)
        return self.router.traits(name, self.user_id)

    def blocking(self, name: str) -> bool:
        """True for sync targets: `aexecute` runs them on a worker thread it may abandon on
        timeout (async targets are awaited), and a runner may call `execute` inline."""
        hit = self._route(name)
        if hit is None:
            return False
        kind, target = hit
        if kind == ToolKind.BUILTIN:
            return True
        if kind in (ToolKind.FUNCTION, ToolKind.LOCAL_MCP):
            return not target.is_async
        return False

    # ---- execution -------------------------------------------------------------------------

    def _check_allowed(self, call: AgentToolCall) -> None:
        if self.allowed is not None and call.name not in self.allowed:
            raise ToolNotFoundError(call.name, sorted(self.allowed)[:3], "not exposed to this request")

    def _result(self, call: AgentToolCall, output: ToolOutput, started: float) -> AgentToolResult:
        self._trace.set(output.trace)
        return AgentToolResult(
            name=call.name,
            call_id=call.call_id,
            output=output.text,
            trace=output.trace,
            duration=time.perf_counter() - started,
        )

    def _failed(self, call: AgentToolCall, exc: Exception, started: float) -> AgentToolResult:
        self._trace.set(None)
        return error_result(call, exc, time.perf_counter() - started)

    def execute(self, call: AgentToolCall) -> AgentToolResult:
        started = time.perf_counter()
        try:
            self._check_allowed(call)
            output = self.router.execute(call.name, call.arguments, self.user_id)
        except Exception as exc:
            return self._failed(call, exc, started)
        return self._result(call, output, started)

    async def aexecute(self, call: AgentToolCall) -> AgentToolResult:
        started = time.perf_counter()
        try:
            self._check_allowed(call)
            if self.blocking(call.name):
                # abandon_on_cancel: a per-call timeout must return on time even though a thread
                # cannot be killed (the router's own to_thread would wait for the tool to finish).
                run = functools.partial(self.router.execute, call.name, call.arguments, self.user_id)
                output = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
            else:
                output = await self.router.aexecute(call.name, call.arguments, self.user_id)
        except Exception as exc:
            return self._failed(call, exc, started)
        return self._result(call, output, started)

    def last_trace(self) -> Any:
        return self._trace.get()
