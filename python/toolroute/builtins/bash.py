"""The `bash` built-in (spec section 6): shell commands and background process management.

Actions: exec (run to the end with a timeout), start (run in the background), status, logs,
write (stdin), stop and list. Everything runs confined by the current BuiltInToolContext: the cwd
must lie inside its roots, processes belong to (workspace, user), commands get an allowlisted
environment, and with a `sandbox` mode they run under bubblewrap (or Landlock as the fallback).
The text returned never exceeds `max_output_chars`. See docs/bash.md.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from toolroute.builtins._process import (
    BackgroundProcess,
    CommandSpec,
    LostProcess,
    Owner,
    ProcessTable,
    SpawnError,
    StdinUnavailable,
    TooManyProcesses,
    UnknownProcess,
    command_environment,
    run_command,
)
from toolroute.builtins._process.command import CommandResult
from toolroute.builtins._process.pump import Pump
from toolroute.builtins._process.sandbox import (
    SandboxPlan,
    SandboxUnavailable,
    check_network,
    describe,
    network_label,
    resolve_kind,
    sandbox_environment,
)
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.cancellation import current_cancel_token, stop_on_cancel
from toolroute.context import BuiltInToolContext, ToolLimits
from toolroute.errors import ToolArgumentError, ToolExecutionError
from toolroute.outputcap import cap_text
from toolroute.types import ToolOutput, current_resources

NAME = "bash"
RESOURCE_KEY = "bash.processes"
DEFAULT_LOG_LIMIT = 12_000  # bytes per stream, as AI4J's defaultBashLogChars
TIMEOUT_HINT = (
    "Command timed out and its whole process group was ended. If it is interactive or long-running, "
    "use action=start and then action=logs/status/write/stop instead of action=exec."
)
LEFTOVER_NOTE = (
    "The shell exited but left processes running in its group; they were ended. Commands are not "
    "allowed to outlive their shell: use action=start (without a trailing '&') for long-running ones."
)

COMMAND_ECHO_CHARS = 1000  # a result repeats at most this much of the command
FIT_ROUNDS = 20  # bisection steps when escaping pushes a result over max_output_chars

Action = Literal["exec", "start", "status", "logs", "write", "stop", "list"]


class BashRequest(BuiltinRequest):
    action: Action = Field(
        "exec",
        description=(
            "exec: run `command` to the end and return its exit code and output; start: run it in the "
            "background and return a processId; status/logs/write/stop: act on `process_id`; "
            "list: the background processes of this workspace"
        ),
    )
    command: str | None = Field(None, description="the shell command, run with `bash -c` (exec, start)")
    cwd: str | None = Field(
        None, description="working directory, relative to the workspace root (default) or absolute inside the roots"
    )
    timeout: float | None = Field(
        None, description="exec: seconds before the command's process group is ended (default set by the host)"
    )
    # AI4J's name and unit; hidden from the schema so models see a single timeout.
    timeout_ms: SkipJsonSchema[float | None] = Field(None, validation_alias=AliasChoices("timeout_ms", "timeoutMs"))
    process_id: str | None = Field(
        None,
        validation_alias=AliasChoices("process_id", "processId"),
        description="status/logs/write/stop: the processId returned by start",
    )
    stream: Literal["both", "stdout", "stderr"] = Field("both", description="logs: which output to read")
    offset: int | None = Field(
        None,
        description=(
            "logs: byte offset into stdout (or the chosen stream) to read from, the nextOffset of the last "
            "call; omitted: the newest output"
        ),
    )
    stderr_offset: int | None = Field(
        None,
        validation_alias=AliasChoices("stderr_offset", "stderrOffset"),
        description="logs with stream=both: the byte offset into stderr; omitted: the newest output",
    )
    limit: int | None = Field(None, description=f"logs: most bytes per stream (default {DEFAULT_LOG_LIMIT})")
    input: str | None = Field(
        None, description="write: text sent to the process's stdin; exec/start: initial stdin (exec then closes it)"
    )
    close_stdin: bool = Field(
        False,
        validation_alias=AliasChoices("close_stdin", "closeStdin"),
        description="write: close stdin after the input (end of file)",
    )
    # Variables set for this command on top of the context's (a host API's per-call environment,
    # e.g. an Agents SDK sandbox manifest's); hidden, as a model sets variables in its command.
    env: SkipJsonSchema[dict[str, str] | None] = None

    @field_validator("timeout", "timeout_ms", "limit", mode="after")
    @classmethod
    def _non_positive_is_default(cls, value: float | None) -> float | None:
        # AI4J treats a missing or non-positive timeout/limit as "use the default".
        return value if value is not None and value > 0 else None

    @field_validator("offset", "stderr_offset", mode="after")
    @classmethod
    def _negative_is_tail(cls, value: int | None) -> int | None:
        return value if value is not None and value >= 0 else None

    @field_validator("env", mode="after")
    @classmethod
    def _variable_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name, text in (value or {}).items():
            if not name or "=" in name or "\0" in name or "\0" in text:
                raise ValueError(f"env: {name!r} cannot be an environment variable (empty, '=' or NUL)")
        return value

    @field_validator("command", "cwd", "process_id", mode="after")
    @classmethod
    def _blank_is_missing(cls, value: str | None) -> str | None:
        # AI4J's function form marks every field required, so models fill unused ones with "".
        return value if value is not None and value.strip() else None


# ---- per-router state ---------------------------------------------------------------------

_fallback_table: ProcessTable | None = None
_fallback_lock = threading.Lock()


def process_table() -> ProcessTable:
    """This router's process table (closed with the router); a module-wide one without a router."""
    resources = current_resources()
    if resources is not None:
        return resources.get(RESOURCE_KEY, ProcessTable)
    global _fallback_table
    with _fallback_lock:
        if _fallback_table is None:
            _fallback_table = ProcessTable()
        return _fallback_table


def owner_of(ctx: BuiltInToolContext) -> Owner:
    return (str(ctx.workspace), ctx.user_id)


# ---- argument handling --------------------------------------------------------------------


def _require(value: str | None, what: str, action: str) -> str:
    if value is None:
        raise ToolArgumentError(f"bash {action} requires a non-empty {what}")
    return value


def resolve_cwd(ctx: BuiltInToolContext, cwd: str | None) -> Path:
    """The workspace root, or `cwd` confined to the context's roots (read-only roots allowed)."""
    if cwd is None:
        return ctx.workspace
    path = ctx.resolve(cwd)
    if not path.is_dir():
        raise ToolArgumentError(f"cwd {cwd!r} is not a directory (resolved to {path})")
    return path


def effective_timeout(limits: ToolLimits, request: BashRequest) -> tuple[float, str | None]:
    asked = request.timeout or (request.timeout_ms / 1000 if request.timeout_ms else None)
    if asked is None:
        return limits.command_timeout, None
    if asked > limits.max_command_timeout:
        return limits.max_command_timeout, (
            f"the requested timeout of {asked:g} s was lowered to the maximum of {limits.max_command_timeout:g} s"
        )
    return asked, None


def sandbox_plan(ctx: BuiltInToolContext) -> SandboxPlan | None:
    """How this context's commands are confined; None when they are not."""
    try:
        kind = resolve_kind(ctx.sandbox)
    except SandboxUnavailable as exc:
        raise ToolExecutionError(f"sandbox={ctx.sandbox!r} is set but cannot be honoured: {exc}", tool=NAME) from None
    if kind == "none":
        # "off" asked for no confinement at all; an allowlist there, or "internet" where a sandbox
        # was asked for but none works, would silently be the host's network.
        if isinstance(ctx.sandbox_network, tuple) or (ctx.sandbox != "off" and ctx.sandbox_network == "internet"):
            raise ToolExecutionError(
                f"sandbox_network={ctx.sandbox_network!r} confines the network of sandboxed commands, but "
                f"sandbox={ctx.sandbox!r} runs them unconfined here: they would share the host's network",
                tool=NAME,
            )
        return None
    plan = SandboxPlan(
        kind=kind,
        workspace=ctx.workspace,
        private_tmp=process_table().private_tmp.folder(ctx.workspace, ctx.sandbox_uid),
        writable=tuple(p.resolve() for p in ctx.sandbox_writable),
        read_only=tuple(p.resolve() for p in ctx.read_only_roots),
        network=ctx.sandbox_network,
        view=ctx.sandbox_view,
        hidden=tuple(p.resolve() for p in ctx.sandbox_hidden),
        uid=ctx.sandbox_uid,
        dns=ctx.sandbox_dns,
        owner=ctx.user_id,
    )
    try:
        check_network(plan)
    except SandboxUnavailable as exc:
        raise ToolExecutionError(
            f"sandbox_network={ctx.sandbox_network!r} cannot be honoured: {exc}", tool=NAME
        ) from None
    return plan


def confinement(plan: SandboxPlan | None) -> dict[str, Any]:
    """What a result reports about its command's confinement."""
    if plan is None:
        return {"confinement": "none"}
    shown: dict[str, Any] = {"confinement": plan.kind, "network": network_label(plan.network), "view": plan.view}
    if isinstance(plan.network, tuple):
        shown["networkAllow"] = list(plan.network)
    if plan.uid is not None:
        shown["uid"] = plan.uid
    return shown


def describe_confinement(ctx: BuiltInToolContext) -> dict[str, object]:
    """What commands of this context would run under (for `toolroute tools`), without running any."""
    return describe(ctx.sandbox, ctx.sandbox_network, ctx.sandbox_view)


def command_spec(ctx: BuiltInToolContext, request: BashRequest) -> CommandSpec:
    command = _require(request.command, "command", request.action)
    return context_command(ctx, command, resolve_cwd(ctx, request.cwd), env=request.env)


def context_command(
    ctx: BuiltInToolContext, command: str, cwd: Path | None = None, *, env: Mapping[str, str] | None = None
) -> CommandSpec:
    """`command` as this context runs every command (bash's, a diagnostics checker's, a code
    program's): in its sandbox, with its environment allowlist (then `env`), in `cwd` (default:
    the workspace)."""
    plan = sandbox_plan(ctx)
    environment = command_environment(ctx.env_allowlist, overrides=env)
    if plan is not None:
        environment = sandbox_environment(plan, environment)
    return CommandSpec(command, cwd or ctx.workspace, environment, plan)


def echo(command: str) -> str:
    """The command as results repeat it: cut, since the model wrote it and the cap is for output."""
    if len(command) <= COMMAND_ECHO_CHARS:
        return command
    return command[:COMMAND_ECHO_CHARS] + f"[... {len(command) - COMMAND_ECHO_CHARS} more characters]"


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False)


def fit(render: Callable[[int], dict[str, Any]], budget: int, limit: int) -> dict[str, Any]:
    """`render(b)` for the largest byte budget b <= `budget` whose JSON text fits `limit` chars.

    Output bytes become more characters once JSON-escaped (a quote 2, an ESC byte 6), so the byte
    budget alone does not bound the text; the budget is bisected until the text fits."""
    result = render(budget)
    if len(dumps(result)) <= limit:
        return result
    lo, hi, best = 0, budget, render(0)
    for _ in range(FIT_ROUNDS):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        candidate = render(mid)
        if len(dumps(candidate)) <= limit:
            lo, best = mid, candidate
        else:
            hi = mid
    return _fit_echo(best, limit)


def _fit_echo(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """`result` with its command echo shortened until its JSON fits `limit` (an echo of a long
    command full of characters that JSON escapes can outgrow a small cap by itself)."""
    command = result.get("command")
    if len(dumps(result)) <= limit or not isinstance(command, str):
        return result
    lo, hi = 0, len(command)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if len(dumps({**result, "command": cap_text(command, mid)})) <= limit:
            lo = mid
        else:
            hi = mid
    return {**result, "command": cap_text(command, lo)}


def _process(ctx: BuiltInToolContext, request: BashRequest) -> BackgroundProcess:
    process_id = _require(request.process_id, "process_id", request.action)
    try:
        return process_table().get(owner_of(ctx), process_id)
    except LostProcess as exc:
        raise ToolExecutionError(
            f"process {process_id!r} is lost: it was started on another server instance ({exc.instance}), "
            "which is no longer serving you (it stopped, restarted or was replaced behind the load balancer); "
            "its process, output and status cannot be reached from here. Start the command again if needed.",
            tool=NAME,
        ) from None
    except UnknownProcess:
        raise ToolArgumentError(
            f"unknown process_id {process_id!r}: no process of that id was started in this workspace "
            "(action=list shows them)"
        ) from None


# ---- actions ------------------------------------------------------------------------------


@contextlib.contextmanager
def tracked(pump: Pump) -> Iterator[None]:
    """While an exec runs, closing the router or cancelling the call (the MCP client went away)
    ends its process group."""
    with process_table().foreground(pump), stop_on_cancel(pump.request_stop):
        yield


def cancelled() -> bool:
    token = current_cancel_token()
    return token is not None and token.cancelled


def _exec(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    spec = command_spec(ctx, request)
    timeout, timeout_note = effective_timeout(ctx.limits, request)
    stdin = request.input.encode() if request.input else None
    try:
        result = run_command(
            spec,
            timeout=timeout,
            output_limit=ctx.limits.max_output_chars,
            stdin=stdin,
            track=tracked,
        )
    except SpawnError as exc:
        raise ToolExecutionError(str(exc), tool=NAME) from None
    outcome = result.outcome
    notes = [n for n in (timeout_note, TIMEOUT_HINT if outcome.timed_out else None) if n]
    if outcome.stopped and cancelled():
        notes.append("The call was cancelled (its client went away or cancelled it), so the command was ended.")
    elif outcome.stopped:
        notes.append("The command was ended because its router was closed or the host is shutting down.")
    if outcome.leftovers:
        notes.append(LEFTOVER_NOTE)
    if outcome.unkillable:
        notes.append("Some processes of the command's group survived SIGKILL (uninterruptible sleep).")
    return fit(
        lambda budget: _exec_result(spec, result, budget, notes),
        ctx.limits.max_output_chars,
        ctx.limits.max_output_chars,
    )


def _exec_result(spec: CommandSpec, result: CommandResult, budget: int, notes: list[str]) -> dict[str, Any]:
    outcome = result.outcome
    stdout, stderr = result.render(budget)
    return {
        "command": echo(spec.command),
        "workingDirectory": str(spec.cwd),
        "exitCode": outcome.exit_code,
        "signal": outcome.signal_name,
        "timedOut": outcome.timed_out,
        "durationSeconds": round(result.duration, 3),
        "stdout": stdout,
        "stderr": stderr,
        "stdoutBytes": result.stdout_bytes,
        "stderrBytes": result.stderr_bytes,
        "sandbox": confinement(spec.sandbox),
        **({"notes": notes} if notes else {}),
    }


def _start(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    spec = command_spec(ctx, request)
    try:
        proc = process_table().start(
            owner_of(ctx),
            spec,
            max_running=ctx.limits.max_background_processes,
            buffer_bytes=ctx.limits.log_buffer_bytes,
        )
    except (SpawnError, TooManyProcesses) as exc:
        raise ToolExecutionError(str(exc), tool=NAME) from None
    if request.input or request.close_stdin:
        _write_stdin(proc, (request.input or "").encode(), close=request.close_stdin)
    return shown(proc)


def shown(proc: BackgroundProcess) -> dict[str, Any]:
    """A process's snapshot as results show it."""
    return {**proc.snapshot(), "command": echo(proc.command), "sandbox": confinement(proc.sandbox)}


def _status(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    return shown(_process(ctx, request))


def _logs(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    proc = _process(ctx, request)
    streams = ("stdout", "stderr") if request.stream == "both" else (request.stream,)
    # The two streams share the output budget, as exec's do.
    budget = min(request.limit or DEFAULT_LOG_LIMIT, ctx.limits.max_output_chars // len(streams))
    stderr_offset = request.stderr_offset if request.stream == "both" else request.offset
    offsets = {"stdout": request.offset, "stderr": stderr_offset}
    snapshot = proc.snapshot()

    def render(limit: int) -> dict[str, Any]:
        out: dict[str, Any] = {"processId": proc.id, "status": snapshot["status"], "exitCode": snapshot["exitCode"]}
        for stream in streams:
            chunk = proc.logs(stream, offsets[stream], limit)
            out[stream] = {
                "offset": chunk.offset,
                "nextOffset": chunk.next_offset,
                "truncated": chunk.dropped > 0,
                "droppedBytes": chunk.dropped,
                "more": chunk.more,
                "content": chunk.text,
            }
        return out

    return fit(render, budget, ctx.limits.max_output_chars)


def _write_stdin(proc: BackgroundProcess, data: bytes, *, close: bool) -> int:
    try:
        return proc.write(data, close=close)
    except StdinUnavailable as exc:
        raise ToolExecutionError(str(exc), tool=NAME) from None


def _write(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    proc = _process(ctx, request)
    if request.input is None and not request.close_stdin:
        raise ToolArgumentError("bash write requires input (or close_stdin=true)")
    written = _write_stdin(proc, (request.input or "").encode(), close=request.close_stdin)
    return {"processId": proc.id, "bytesWritten": written, "stdinClosed": request.close_stdin, "process": shown(proc)}


def _stop(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    proc = _process(ctx, request)
    if not proc.stop():
        raise ToolExecutionError(f"{proc.id} did not end after SIGTERM and SIGKILL to its process group", tool=NAME)
    return shown(proc)


def _list(request: BashRequest, ctx: BuiltInToolContext) -> dict[str, Any]:
    """Every process of the owner, oldest first; under a small output cap the oldest are left out."""
    processes = [shown(p) for p in process_table().list(owner_of(ctx))]
    result: dict[str, Any] = {"processes": processes}
    omitted = 0
    while len(dumps(result)) > ctx.limits.max_output_chars and omitted < len(processes):
        omitted += 1
        result = {"processes": processes[omitted:], "omittedOldest": omitted}
    return result


ACTIONS: dict[str, Callable[[BashRequest, BuiltInToolContext], dict[str, Any]]] = {
    "exec": _exec,
    "start": _start,
    "status": _status,
    "logs": _logs,
    "write": _write,
    "stop": _stop,
    "list": _list,
}


def handle(request: BashRequest, ctx: BuiltInToolContext) -> ToolOutput:
    result = ACTIONS[request.action](request, ctx)
    return ToolOutput(dumps(result), trace=result)


TOOL = BuiltinTool(
    name=NAME,
    description=(
        "Run shell commands in the workspace. action=exec runs `command` with bash -c and returns exitCode, "
        "stdout and stderr (long output keeps head and tail); it is ended with its whole process group on "
        "timeout. For servers, watchers or interactive programs use action=start, then logs (poll with "
        "offset=nextOffset), write (stdin), status, stop; list shows them. stdin is closed for exec unless "
        "input is given; there is no terminal; PAGER=cat, NO_COLOR=1, TERM=dumb. Results say under which "
        "sandbox the command ran (sandbox.confinement) and whether it had network access."
    ),
    request_model=BashRequest,
    handler=handle,
    read_only=False,
)
