"""Tasks run by the gateway (issue 60): a task-augmented `tools/call` is answered at once with a
task handle, the call runs on in the background, and `tasks/get`, `tasks/result`, `tasks/cancel`
and `tasks/list` reach it (MCP 2025-11-25; the installed `mcp` SDK has the types, no handler).

The call runs as the plain call would, through the same chain (params validation, the handler,
the tenant's limits, the call's deadline, its audit line): only its request has been answered, so
it has no channel to the client (no progress, and an upstream's question is refused as by a
client without the capability). Its answer, in wire form, is what `tasks/result` gives back: the
same bytes as the plain call's.

A task belongs to the user who created it (the verified bearer's; without auth the server has one
user): another user's task id is not found, the same error as an unknown one. Bounded: a user's
live tasks (working, or finished and kept), and how long a finished task is kept. In memory only:
a restart loses them, and a replica that did not create a task does not know it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolroute.serve.auth import request_user

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from toolroute.serve.audit import AuditLog

log = logging.getLogger("toolroute.serve")

RELATED_TASK = "io.modelcontextprotocol/related-task"
TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list")
AUDIT_LEVEL = "task"

# What the gateway declares: any `tools/call` may be run as a task; tasks can be listed and cancelled.
CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
)

TERMINAL = frozenset({"completed", "failed", "cancelled"})


def offered(version: str | None) -> bool:
    """Whether a connection of `version` is offered tasks: the handshake era's (the 2026-07-28
    Tasks extension is not in the installed SDK)."""
    return version not in MODERN_PROTOCOL_VERSIONS


@dataclass(frozen=True)
class TaskLimits:
    max_live_tasks: int = 32  # per user: working, or finished and still kept
    default_ttl_ms: int = 10 * 60_000  # a finished task is kept this long when the client asks none
    max_ttl_ms: int = 60 * 60_000  # and never longer, whatever it asks
    poll_interval_ms: int = 1_000  # suggested to clients between `tasks/get`

    def __post_init__(self) -> None:
        for name in ("max_live_tasks", "default_ttl_ms", "max_ttl_ms", "poll_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    def ttl(self, asked: int | None) -> int:
        """How long a finished task is kept: what the client asked, within the bound."""
        return self.default_ttl_ms if asked is None else min(max(asked, 1), self.max_ttl_ms)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class _Task:
    task_id: str
    owner: str
    tool: str
    ttl_ms: int
    created_at: str = field(default_factory=_now)
    updated_at: str = ""
    status: types.TaskStatus = "working"
    message: str | None = None
    result: dict[str, Any] | None = None  # the call's answer in wire form
    error: types.ErrorData | None = None  # or the JSON-RPC error it ended with
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ended: anyio.Event = field(default_factory=anyio.Event)
    expires: float | None = None  # monotonic; set when it ends

    def wire(self, poll_ms: int) -> dict[str, Any]:
        """The task as `tasks/get` and its kin answer it."""
        fields: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at or self.created_at,
            "ttl": self.ttl_ms,
        }
        if self.status == "working":
            fields["pollInterval"] = poll_ms
        if self.message is not None:
            fields["statusMessage"] = self.message
        return fields


class _Detached:
    """The client's session as a task's call sees it once the request was answered: nothing more
    can be sent on that request's channel, so no progress, no log messages, and no questions (the
    asker then refuses them as a client without the capability would)."""

    can_send_request = False

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def send_log_message(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def report_progress(self, *args: Any, **kwargs: Any) -> None:
        return None


def not_found() -> MCPError:
    # One error for an unknown id, an expired one and another user's: nothing tells them apart.
    return MCPError(code=types.INVALID_PARAMS, message="Task not found")


def _offered_to(ctx: Any) -> None:
    """A client of an era not offered tasks is answered as by a server without them."""
    if not offered(ctx.protocol_version):
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)


def owner_of(ctx: Any) -> str:
    user = request_user(ctx)
    return "" if user is None else str(user)


class TaskStore:
    """The tasks of one server, by id, with their owners' bounds; its calls run in the task group
    `running` opens (around serving), so they outlive the request that created them."""

    def __init__(self, limits: TaskLimits | None = None, *, audit: AuditLog | None = None) -> None:
        self.limits = limits or TaskLimits()
        self.audit = audit
        self._tasks: dict[str, _Task] = {}
        self._group: TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve tasks while inside; leaving cancels the calls still running (a stop loses them)."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    # ---- the bounds --------------------------------------------------------------------------

    def _expire(self) -> None:
        now = time.monotonic()
        for task_id in [t.task_id for t in self._tasks.values() if t.expires is not None and t.expires <= now]:
            del self._tasks[task_id]

    def _owned(self, ctx: Any, task_id: str) -> _Task:
        _offered_to(ctx)
        self._expire()
        task = self._tasks.get(task_id)
        if task is None or task.owner != owner_of(ctx):
            raise not_found()
        return task

    # ---- a task-augmented `tools/call` (server middleware) -----------------------------------

    async def middleware(self, ctx: Any, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if (
            ctx.method != "tools/call"
            or ctx.request_id is None
            or not isinstance(params, Mapping)
            or params.get("task") is None
            or not offered(ctx.protocol_version)
        ):
            return await call_next(ctx)
        try:
            parsed = types.CallToolRequestParams.model_validate(params, by_name=False)
        except ValidationError:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid request parameters") from None
        task = self._create(ctx, parsed)
        # The rest of the chain, as for a plain call, without the task and its request's channel.
        plain = {k: v for k, v in params.items() if k != "task"}
        meta = {k: v for k, v in (ctx.meta or {}).items() if k != "progress_token"}
        detached = dataclasses.replace(ctx, params=plain, meta=meta or None, session=_Detached(ctx.session))
        assert self._group is not None  # _create refuses otherwise
        self._group.start_soon(self._run, task, call_next, detached)
        return {"task": task.wire(self.limits.poll_interval_ms)}

    def _create(self, ctx: Any, params: types.CallToolRequestParams) -> _Task:
        if self._group is None:
            raise MCPError(code=types.INTERNAL_ERROR, message="this server is not running tasks")
        self._expire()
        owner = owner_of(ctx)
        live = sum(1 for t in self._tasks.values() if t.owner == owner)
        if live >= self.limits.max_live_tasks:
            raise MCPError(
                code=types.INVALID_REQUEST,
                message=(
                    f"too many tasks: {live} of this user's are working or kept (the limit is "
                    f"{self.limits.max_live_tasks}); cancel one, or wait for a finished one's ttl to end"
                ),
            )
        asked = params.task.ttl if params.task is not None else None
        task = _Task(secrets.token_urlsafe(18), owner, params.name, self.limits.ttl(asked))
        self._tasks[task.task_id] = task
        self._audit(task, "created")
        return task

    async def _run(self, task: _Task, call_next: CallNext, ctx: Any) -> None:
        started = time.monotonic()
        try:
            with task.scope:
                answer = await call_next(ctx)
                self._end(task, "failed" if _is_error(answer) else "completed", result=_as_dict(answer))
        except Exception as exc:
            # The error the plain call's client would have had (the SDK's mapping of it).
            error = handler_exception_to_error_data(exc)
            if error is None:
                log.exception("task %s of %r ended in an error", task.task_id, task.tool)
                error = types.ErrorData(code=types.INTERNAL_ERROR, message="Internal server error")
            self._end(task, "failed", error=error)
        finally:
            if not task.ended.is_set():  # cancelled: by tasks/cancel, or the server's stop
                self._end(task, "cancelled", message="The task was cancelled.")
            self._audit(task, task.status, started)

    def _end(self, task: _Task, status: types.TaskStatus, **fields: Any) -> None:
        if task.ended.is_set():
            return
        for name, value in fields.items():
            setattr(task, name, value)
        task.status = status
        task.updated_at = _now()
        task.expires = time.monotonic() + task.ttl_ms / 1000
        if status == "failed" and task.error is not None:
            task.message = task.error.message
        task.ended.set()

    # ---- the methods -------------------------------------------------------------------------

    async def on_get(self, ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
        return self._owned(ctx, params.task_id).wire(self.limits.poll_interval_ms)

    async def on_result(self, ctx: Any, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        """The call's answer once it ends (waits for it), as the plain call would have answered."""
        task = self._owned(ctx, params.task_id)
        await task.ended.wait()
        if task.error is not None:
            raise MCPError.from_error_data(task.error)
        if task.result is None:  # cancelled
            raise MCPError(code=types.INVALID_PARAMS, message="Task was cancelled: it has no result")
        meta = {**(task.result.get("_meta") or {}), RELATED_TASK: {"taskId": task.task_id}}
        return {**task.result, "_meta": meta}

    async def on_cancel(self, ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        """Cancels the running call (the upstream is told, as for a client's cancellation)."""
        task = self._owned(ctx, params.task_id)
        if task.status in TERMINAL:
            message = f"Cannot cancel task: already in terminal status '{task.status}'"
            raise MCPError(code=types.INVALID_PARAMS, message=message)
        self._end(task, "cancelled", message="The task was cancelled by request.")
        task.scope.cancel()
        return task.wire(self.limits.poll_interval_ms)

    async def on_list(self, ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        """This user's tasks, all on one page (their number is bounded)."""
        _offered_to(ctx)
        self._expire()
        owner = owner_of(ctx)
        return {"tasks": [t.wire(self.limits.poll_interval_ms) for t in self._tasks.values() if t.owner == owner]}

    def register(self, server: Any) -> None:
        """Its methods on `server`, and its middleware just outside the last one there (the
        prebuilt answers', serve/prebuilt.py: a task's answer is then the plain call's, prebuilt)."""
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.on_get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.on_result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.on_cancel)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.on_list)
        server.middleware.insert(len(server.middleware) - 1, self.middleware)

    def _audit(self, task: _Task, outcome: str, started: float | None = None) -> None:
        if self.audit is None:
            return
        self.audit.record(
            user=task.owner or None,
            tool=task.tool,
            started=time.monotonic() if started is None else started,
            outcome=outcome,
            result_chars=0,
            arguments=None,
            level=AUDIT_LEVEL,
            task=task.task_id,
        )


def _as_dict(answer: HandlerResult) -> dict[str, Any]:
    if isinstance(answer, Mapping):
        return dict(answer)
    if answer is None:
        return {}
    return answer.model_dump(by_alias=True, mode="json", exclude_none=True)


def _is_error(answer: HandlerResult) -> bool:
    # A tool's error result ends its task as failed (the spec's rule for tool calls).
    return bool(answer.get("isError")) if isinstance(answer, Mapping) else bool(getattr(answer, "is_error", False))


# ---- what the listing says of each tool ------------------------------------------------------


def with_task_support(tools: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    """`tools` (wire form) as a connection of `version` is served them: where the gateway runs
    tasks, any tool can be called as one (`optional`); an upstream's `required` stays (its server
    refuses a plain call, and the gateway calls it plainly)."""
    if not offered(version):
        return tools
    return [_task_supported(tool) for tool in tools]


def _task_supported(tool: dict[str, Any]) -> dict[str, Any]:
    execution = tool.get("execution") or {}
    if execution.get("taskSupport") == "required":
        return tool
    return {**tool, "execution": {**execution, "taskSupport": "optional"}}


def tools_with_task_support(tools: list[types.Tool], version: str) -> list[types.Tool]:
    """`with_task_support` of tool models (a listing the SDK serialises itself)."""
    if not offered(version):
        return tools
    out = []
    for tool in tools:
        dumped = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        out.append(types.Tool.model_validate(_task_supported(dumped), by_name=False))
    return out
