"""`exec`: run one command to its end with a deadline, keeping a bounded head and tail of output."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from toolroute.builtins._process.buffers import HeadTail, share_budget
from toolroute.builtins._process.pump import CommandSpec, Outcome, Pump, spawn


@dataclass(frozen=True)
class CommandResult:
    outcome: Outcome
    stdout: str
    stderr: str
    stdout_bytes: int  # sizes before any cut
    stderr_bytes: int
    duration: float  # seconds


def run_command(
    spec: CommandSpec,
    *,
    timeout: float,
    output_limit: int,
    stdin: bytes | None = None,
    track: Callable[[Pump], AbstractContextManager[None]] | None = None,
) -> CommandResult:
    """Run `spec` to its end; stdout and stderr share `output_limit` bytes (head and tail kept).

    stdin is /dev/null unless `stdin` is given, in which case it is written and then closed.
    `track` (e.g. `ProcessTable.foreground`) holds the running command so its owner can stop it.
    """
    out, err = HeadTail(output_limit), HeadTail(output_limit)
    started = time.monotonic()
    proc = spawn(spec, stdin_pipe=stdin is not None)
    pump = Pump(proc, out.write, err.write, stdin_data=stdin, stoppable=track is not None)
    with track(pump) if track is not None else contextlib.nullcontext():
        outcome = pump.run(deadline=started + timeout)
    duration = time.monotonic() - started
    out_budget, err_budget = share_budget((out.total, err.total), output_limit)
    stdout, _ = out.render(out_budget)
    stderr, _ = err.render(err_budget)
    return CommandResult(outcome, stdout, stderr, out.total, err.total, duration)
