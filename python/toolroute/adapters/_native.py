"""The providers' native coding tools, run as calls of the allowlist's own built-ins.

A model of late 2026 does not call a function named `apply_patch` or `bash`: it calls a tool
type the provider defines (OpenAI's `apply_patch`, `shell`, `local_shell`; Anthropic's `bash`,
`str_replace_based_edit_tool`, `memory`), and the host executes it. Each is one of toolroute's
built-ins in another shape, so each native call is run here as a call of that built-in through
the same `ExposedTools` door: the allowlist decides (a native type whose built-in is not exposed
is refused), the built-in's confinement, sandbox, caps and atomic writes apply, and the trace,
the agent layer's approval and served mode's audit see an ordinary `apply_patch` or `bash` call.
What differs is only the vocabulary, which the provider adapters translate.

Each operation is written once, as a generator yielding its tool calls (`_twins`): the sync and
async adapters drive the same body.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolroute._twins import Body, Step
from toolroute.allowlist import CallOutcome, ExposedTools
from toolroute.builtins.patch_operation import PatchOperation
from toolroute.textsafety import cut_notice


@dataclass(frozen=True)
class CommandRun:
    """One shell command's end, as the native shell types report it."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    duration: float
    refused: str | None = None  # the door's or the tool's reason, when the command never ran


def run_command(
    tools: ExposedTools,
    command: str,
    *,
    timeout: float | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Body[CommandRun]:
    """`command` through the allowlist's `bash` (exec): its streams, exit code and timeout;
    `env`'s variables set on top of the context's."""
    arguments: dict[str, Any] = {"command": command}
    if env:
        arguments["env"] = dict(env)
    if timeout is not None:
        arguments["timeout"] = max(timeout, 0.001)
    if cwd is not None:
        arguments["cwd"] = cwd
    outcome: CallOutcome = yield Step(tools.execute, tools.aexecute, ("bash", arguments))
    result = outcome.trace if isinstance(outcome.trace, dict) else None
    if outcome.is_error or result is None:
        return CommandRun("", outcome.text, 126, False, 0.0, refused=outcome.text)
    return CommandRun(
        stdout=str(result.get("stdout", "")),
        stderr=str(result.get("stderr", "")),
        exit_code=int(result.get("exitCode", 1)),
        timed_out=bool(result.get("timedOut")),
        duration=float(result.get("durationSeconds", 0.0)),
    )


@dataclass(frozen=True)
class NewOutput:
    """What a background process wrote since the last read, and whether it still runs."""

    stdout: str
    stderr: str
    running: bool
    exit_code: int | None
    error: str | None = None  # the door's or the tool's answer when the process cannot be read


LOG_PAGES = 64  # pages read at most in one go (each up to the context's output cap)


def read_new_output(tools: ExposedTools, process_id: str, offsets: dict[str, int]) -> Body[NewOutput]:
    """Background `process_id`'s output since `offsets` (advanced in place) through the
    allowlist's `bash` (logs), page after page while more is waiting."""
    out: list[str] = []
    err: list[str] = []
    trace: dict[str, Any] = {}
    for _ in range(LOG_PAGES):
        arguments = {"action": "logs", "process_id": process_id, "offset": offsets["stdout"]}
        arguments["stderr_offset"] = offsets["stderr"]
        logs: CallOutcome = yield Step(tools.execute, tools.aexecute, ("bash", arguments))
        if logs.is_error or not isinstance(logs.trace, dict):
            return NewOutput("".join(out), "".join(err), False, None, error=logs.text)
        trace = logs.trace
        more = False
        for stream, parts in (("stdout", out), ("stderr", err)):
            chunk = trace.get(stream) or {}
            offsets[stream] = int(chunk.get("nextOffset", offsets[stream]))
            parts.append(str(chunk.get("content", "")))
            more = more or bool(chunk.get("more"))
        if not more:
            break
    exit_code = trace.get("exitCode")
    return NewOutput("".join(out), "".join(err), trace.get("status") == "RUNNING", exit_code)


def capped(text: str, limit: int | None) -> str:
    """`text` cut to `limit` characters (a native call's own cap), head kept, the cut said."""
    if limit is None or len(text) <= limit:
        return text
    notice = "\n" + cut_notice(len(text) - limit, len(text), "characters", "the call's max_output_length") + "\n"
    keep = max(limit - len(notice), 0)
    return text[:keep] + notice[: max(limit - keep, 0)]


def apply_operations(tools: ExposedTools, operations: Sequence[PatchOperation]) -> Body[CallOutcome]:
    """The operations through the allowlist's `apply_patch`, all of them or none."""
    ops = [dict(op) for op in operations]  # its fields, as the tool call's arguments
    outcome: CallOutcome = yield Step(tools.execute, tools.aexecute, ("apply_patch", {"operations": ops}))
    return outcome


def argv_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A shell command that runs `argv` as given (no word splitting, no expansion), with
    `env`'s variables set on top of the command environment's."""
    assignments = [f"{k}={v}" for k, v in (env or {}).items()]
    return shlex.join(["env", *assignments, *argv] if assignments else list(argv))


def local_shell_output(run: CommandRun) -> str:
    """`local_shell_call_output`'s JSON text, as Codex's CLI writes it."""
    output = run.stdout + run.stderr
    metadata = {"exit_code": run.exit_code, "duration_seconds": round(run.duration, 3)}
    if run.timed_out:
        metadata["timed_out"] = True
    return json.dumps({"output": output, "metadata": metadata}, ensure_ascii=False)


__all__ = [
    "CommandRun",
    "NewOutput",
    "PatchOperation",
    "apply_operations",
    "argv_command",
    "capped",
    "local_shell_output",
    "read_new_output",
    "run_command",
]


# Who may call a tool under each provider's programmatic tool calling (the `allowed_callers`
# literals of the SDKs' tool params): the model itself, or code the provider runs.
OPENAI_CALLERS = frozenset({"direct", "programmatic"})
ANTHROPIC_CALLERS = frozenset(
    {"direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"}
)


def checked_callers(callers: Sequence[str] | None, known: frozenset[str]) -> tuple[str, ...] | None:
    """`allowed_callers` as given, refusing a value the provider does not define."""
    if callers is None:
        return None
    unknown = sorted(set(callers) - known)
    if unknown or not callers:
        raise ValueError(f"allowed_callers must be some of {', '.join(sorted(known))}; got {list(callers)}")
    return tuple(dict.fromkeys(callers))
