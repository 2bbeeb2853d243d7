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
from toolroute.builtins import builtin_tools
from toolroute.errors import ToolError, ToolExecutionError, ToolNotFoundError
from toolroute.exposure import Exposure
from toolroute.router import ToolRouter
from toolroute.types import Tool, ToolKind, ToolOutput, ToolTraits

# The only built-ins that may run beside other calls. AI4J also counts bash as read-only; a
# command can do anything, so here bash (and every other built-in) is side-effecting.
# The built-ins that only read, from toolroute's own tools' declarations (`BuiltinTool(read_only=...)`).
READ_ONLY_BUILTINS = frozenset(name for name, tool in builtin_tools().items() if tool.read_only)


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


def _resolved(router: ToolRouter, names: Collection[str], user_id: str | None) -> list[Tool]:
    """The tools `names` route to now (loading lazily connected tool lists); unknown names are
    left out, so they stay refused."""
    tools = []
    for name in dict.fromkeys(names):
        try:
            tools.append(router.resolve(name, user_id))
        except ToolError:
            continue
    return tools


class RouterToolExecutor:
    """A `TraceableToolExecutor` over a `ToolRouter`; built-ins fill `trace` with their facts.

    `allowed` limits execution to what was exposed to this request (AI4J's deny-by-default
    `ToolUtilExecutor`): an `Exposure` (what `for_request` builds) runs each exposed name's very
    tool; a collection of names is resolved to its tools once, here. None allows whatever the
    router can reach.
    """

    def __init__(
        self,
        router: ToolRouter,
        *,
        user_id: str | None = None,
        allowed: Exposure | Collection[str] | None = None,
    ) -> None:
        self.router = router
        self.user_id = user_id
        if allowed is None or isinstance(allowed, Exposure):
            self.exposure = allowed
        else:
            self.exposure = Exposure.of(_resolved(router, allowed, user_id), user_id)
        self._trace = TraceSlot(f"router_{id(self)}")

    @property
    def allowed(self) -> frozenset[str] | None:
        return None if self.exposure is None else frozenset(self.exposure.tools)

    @classmethod
    def for_request(
        cls,
        router: ToolRouter,
        function_list: Sequence[str] | None = None,
        mcp_server_ids: Sequence[str] | None = None,
        user_id: str | None = None,
    ) -> RouterToolExecutor:
        """An executor limited to exactly what `router.get_all_tools(...)` exposes to this request."""
        return cls(router, user_id=user_id, allowed=router.expose(function_list, mcp_server_ids, user_id))

    # ---- scheduling hints ----------------------------------------------------------------

    def _route(self, name: str) -> Tool | None:
        if self.exposure is not None:
            return self.exposure.get(name)
        return self.router.route(name, self.user_id)

    def kind(self, name: str) -> str | None:
        """ "builtin", "user_mcp", "local_mcp", "function", "global_mcp", or None when unknown."""
        tool = self._route(name)
        return None if tool is None else tool.kind.key

    def traits(self, name: str) -> ToolTraits:
        tool = self._route(name)
        if tool is None:
            return ToolTraits()
        # A built-in is read-only only if toolroute's own tool of that name is: a table that
        # swaps in another `bash` declared read-only still runs commands alone.
        if tool.kind == ToolKind.BUILTIN and name not in READ_ONLY_BUILTINS:
            return ToolTraits(read_only=False, idempotent=False)
        return tool.traits

    def blocking(self, name: str) -> bool:
        """True for sync targets: `aexecute` runs them on a worker thread it may abandon on
        timeout (async targets are awaited), and a runner may call `execute` inline."""
        tool = self._route(name)
        return tool is not None and tool.blocking()

    # ---- execution -------------------------------------------------------------------------

    def _target(self, call: AgentToolCall) -> Tool | None:
        """The exposed tool `call` names (None: route by name); refuses unexposed names."""
        if self.exposure is None:
            return None
        tool = self.exposure.get(call.name)
        if tool is None:
            raise ToolNotFoundError(call.name, sorted(self.exposure.tools)[:3], "not exposed to this request")
        return tool

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
            tool = self._target(call) or self.router.resolve(call.name, self.user_id)
            output = self.router.run(tool, call.arguments)
        except Exception as exc:
            return self._failed(call, exc, started)
        return self._result(call, output, started)

    async def aexecute(self, call: AgentToolCall) -> AgentToolResult:
        started = time.perf_counter()
        try:
            tool = self._target(call) or await self.router.aresolve(call.name, self.user_id)
            if tool.blocking():
                # abandon_on_cancel: a per-call timeout must return on time even though a thread
                # cannot be killed (the router's own to_thread would wait for the tool to finish).
                run = functools.partial(self.router.run, tool, call.arguments)
                output = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
            else:
                output = await self.router.arun(tool, call.arguments)
        except Exception as exc:
            return self._failed(call, exc, started)
        return self._result(call, output, started)

    def last_trace(self) -> Any:
        return self._trace.get()
