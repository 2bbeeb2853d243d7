"""The code tool (`run_code`): one call whose input is a Python program that calls the request's
tools as functions; only what the program prints comes back.

The program runs as a command does (bash's sandbox, environment, time limit and process-group
end), in its own interpreter process, with a memory limit. Its calls come back over a pipe
(`channel.py`) and run here, on the very tools the request was shown (an `Exposure`'s objects:
the same user, the same precedence), through the agent layer when it ran this call (approval,
trace sinks) or straight through the router otherwise.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field, field_validator

from toolroute.builtins._process import SpawnError, run_command
from toolroute.builtins._process.command import CommandResult
from toolroute.builtins._process.sandbox import SandboxPlan, visible
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.builtins.bash import confinement, context_command, tracked
from toolroute.codemode.catalogue import Entry, entries
from toolroute.codemode.channel import CallServer
from toolroute.codemode.inner import INNER_CALLS, InnerCaller, InnerReply, not_callable
from toolroute.codemode.inside import CHANNEL_VARIABLE
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolExecutionError
from toolroute.types import Tool, ToolOutput

DEFAULT_NAME = "run_code"
INNER_WAIT = 5.0  # seconds a finished program's still-running inner calls are waited for


class RunsTools(Protocol):
    """What runs an inner call when no agent layer does: the router (`ToolRouter.run`)."""

    def run(self, tool: Tool, argument: str | Mapping[str, Any] | None = None) -> ToolOutput: ...


@dataclass(frozen=True)
class CodeMode:
    """How a router offers code mode: the tool's name (list it in a request's `function_list`),
    the interpreter (None: the host's own where the sandbox shows it, else `python3` on the
    command's PATH), and what bounds one program beside the context's limits."""

    name: str = DEFAULT_NAME
    python: str | None = None
    max_parallel: int = 4  # inner calls running at once
    max_calls: int = 500  # inner calls per program
    memory_bytes: int = 1 << 30  # the program's address space (RLIMIT_AS)
    description_chars: int = 12_000  # the tool list in the description, at most

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"code mode's tool name must be an identifier, not {self.name!r}")
        for field_name in ("max_parallel", "max_calls", "memory_bytes", "description_chars"):
            if getattr(self, field_name) < 1:
                raise ValueError(f"CodeMode.{field_name} must be positive")


class RunCodeRequest(BuiltinRequest):
    code: str = Field(description="the Python program; print what you want to read back")
    timeout: float | None = Field(None, description="seconds before the program is ended (default set by the host)")

    @field_validator("timeout", mode="after")
    @classmethod
    def _non_positive_is_default(cls, value: float | None) -> float | None:
        return value if value is not None and value > 0 else None


ABOUT = (
    "Run a Python program that calls this request's tools as functions; only what it prints comes back "
    "(stdout, then stderr, capped), with its exit status. Use it to chain calls, loop, filter or aggregate "
    "without reading every intermediate result. Each tool below is a global function (also `from tools "
    "import NAME`; `tools.aio.NAME` is its coroutine form, for asyncio.gather), called with keyword "
    "arguments. It returns the tool's result, parsed when it is JSON, else the text, and raises "
    "tools.ToolError (.kind, .message) when the call fails. Calls may run in parallel from threads or "
    "asyncio. help(tools.NAME) shows a tool's parameters. The program runs in a fresh process, with a "
    "time limit; nothing is kept between runs."
)


def describe(catalogue: Iterable[Entry], budget: int, listed: Callable[[str], bool] | None = None) -> str:
    lines: list[str] = []
    names: list[str] = []
    unlisted = 0
    used = len(ABOUT)
    for entry in catalogue:
        if listed is not None and not listed(entry.tool.name):
            unlisted += 1
            continue
        line = f"{entry.signature}  # {entry.summary}" if entry.summary else entry.signature
        if used + len(line) + 1 <= budget and not names:
            lines.append(line)
            used += len(line) + 1
        else:
            names.append(entry.python_name)
    text = ABOUT + "\n\nTools:\n" + "\n".join(lines)
    if names:
        text += f"\nAlso callable ({len(names)} more; help(tools.NAME) for parameters): " + ", ".join(names)
    if unlisted:
        text += f"\n{unlisted} more tools are callable: find them with search_tools, then call them by name."
    return text


def code_tool(
    mode: CodeMode, tools: Iterable[Tool], runner: RunsTools, listed: Callable[[str], bool] | None = None
) -> BuiltinTool[RunCodeRequest]:
    """The code tool of one request: `tools` are what its program may call; its description
    shows those `listed` admits (the rest are deferred: a search finds them)."""
    catalogue = entries(t for t in tools if t.name != mode.name)
    return BuiltinTool(
        name=mode.name,
        description=describe(catalogue, mode.description_chars, listed),
        request_model=RunCodeRequest,
        handler=partial(run_program, mode=mode, catalogue=catalogue, runner=runner),
        read_only=False,
    )


def is_code_tool(tool: object) -> bool:
    """Whether `tool` is a code tool (whose runner may say how its program's calls run)."""
    return isinstance(tool, BuiltinTool) and tool.request_model is RunCodeRequest


# ---- running one program ---------------------------------------------------------------------


def run_program(
    request: RunCodeRequest,
    ctx: BuiltInToolContext,
    *,
    mode: CodeMode,
    catalogue: list[Entry],
    runner: RunsTools,
) -> ToolOutput:
    base = context_command(ctx, "")
    plan, env = base.sandbox, base.env
    python = interpreter(mode, plan, env)
    timeout = min(request.timeout or ctx.limits.command_timeout, ctx.limits.max_command_timeout)
    limits = ctx.limits
    server = CallServer(
        catalogue,
        partial(_run_inner, INNER_CALLS.get(), runner),
        max_parallel=mode.max_parallel,
        max_calls=mode.max_calls,
        max_message_bytes=max(1 << 20, 2 * limits.max_write_bytes),
    )
    read_fd, write_fd = server.child_fds()
    env = {**env, CHANNEL_VARIABLE: f"{read_fd},{write_fd}", "MALLOC_ARENA_MAX": "2"}
    command = f"ulimit -v {mode.memory_bytes // 1024} 2>/dev/null; exec {shlex.quote(python)} -I -c {_program()}"
    spec = replace(base, command=command, env=env, pass_fds=(read_fd, write_fd))
    server.start()
    try:
        result = run_command(
            spec, timeout=timeout, output_limit=limits.max_output_chars, stdin=request.code.encode(), track=tracked
        )
    except SpawnError as exc:
        raise ToolExecutionError(str(exc), tool=mode.name) from None
    finally:  # whatever happened, the channel's pipes and threads end with the call
        calls = server.finish(INNER_WAIT)
    trace = {
        "exitCode": result.outcome.exit_code,
        "signal": result.outcome.signal_name,
        "timedOut": result.outcome.timed_out,
        "durationSeconds": round(result.duration, 3),
        "stdoutBytes": result.stdout_bytes,
        "stderrBytes": result.stderr_bytes,
        "calls": calls,
        "interpreter": python,
        "sandbox": confinement(plan),
        **({"channelError": server.violation} if server.violation else {}),
    }
    return ToolOutput(_text(result, limits.max_output_chars, timeout, server.violation), trace)


def _run_inner(
    through: InnerCaller | None, runner: RunsTools, name: str, entry: Entry | None, arguments: Mapping[str, Any]
) -> InnerReply:
    if through is not None:  # its host said how: the agent layer's policy and sinks, an audit...
        return through(name, arguments, entry is not None)
    if entry is None:
        return InnerReply(False, not_callable(name), "ToolNotFoundError")
    try:
        output = runner.run(entry.tool, arguments)
    except Exception as exc:
        return InnerReply(False, str(exc), type(exc).__name__)
    return InnerReply(True, output.text)


def _text(result: CommandResult, budget: int, timeout: float, violation: str | None) -> str:
    stdout, stderr = result.render(budget)
    outcome = result.outcome
    parts = [stdout]
    if stderr:
        parts.append(f"[stderr]\n{stderr}")
    if outcome.timed_out:
        parts.append(f"[the program was ended: it ran past its time limit of {timeout:g} s]")
    elif outcome.stopped:
        parts.append("[the program was ended: its call was cancelled or the host is shutting down]")
    elif outcome.exit_code != 0:
        signal = f", {outcome.signal_name}" if outcome.signal_name else ""
        parts.append(f"[exit status {outcome.exit_code}{signal}]")
    if violation:
        parts.append(f"[the tool channel was closed: the program sent {violation}]")
    return "\n".join(p for p in parts if p) or "[the program printed nothing]"


@cache
def _program() -> str:
    """The program side's source (inside.py), quoted for bash."""
    return shlex.quote(Path(__file__).with_name("inside.py").read_text(encoding="utf-8"))


def _shows(plan: SandboxPlan, *paths: str) -> bool:
    """Whether a command of `plan` sees each of `paths`, as named and as resolved (a virtual
    environment's python links to its base interpreter; both must be there)."""
    return all(visible(Path(p), plan) and visible(Path(os.path.realpath(p)), plan) for p in paths)


def interpreter(mode: CodeMode, plan: SandboxPlan | None, env: Mapping[str, str]) -> str:
    """The Python the program runs on: the configured one, or the host's own where the sandbox
    shows it whole, or the first `python3` on the command's PATH."""
    if mode.python is not None:
        return mode.python
    if sys.executable and (plan is None or _shows(plan, sys.executable, sys.prefix, sys.base_prefix)):
        return sys.executable
    found = next(
        (
            candidate
            for folder in env.get("PATH", "").split(os.pathsep)
            if folder
            and (candidate := shutil.which("python3", path=folder)) is not None
            and (plan is None or _shows(plan, candidate))
        ),
        None,
    )
    if found is None:
        raise ToolExecutionError(
            "code mode has no Python interpreter its sandbox can run (none of the host's, and no python3 on "
            "the command PATH); set CodeMode(python=...)",
            tool=mode.name,
        )
    return found
