"""`exec`: run one command to its end with a deadline, keeping a bounded head and tail of output."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from toolroute.builtins._process.buffers import HeadTail, share_budget
from toolroute.builtins._process.pump import CommandSpec, Outcome, Pump, spawn
from toolroute.progress import current_progress


@dataclass(frozen=True)
class CommandResult:
    outcome: Outcome
    stdout_capture: HeadTail
    stderr_capture: HeadTail
    duration: float  # seconds

    @property
    def stdout_bytes(self) -> int:  # sizes before any cut
        return self.stdout_capture.total

    @property
    def stderr_bytes(self) -> int:
        return self.stderr_capture.total

    def render(self, budget: int) -> tuple[str, str]:
        """(stdout, stderr) sharing `budget` bytes, each cut to head and tail around a marker."""
        out_budget, err_budget = share_budget((self.stdout_bytes, self.stderr_bytes), budget)
        return self.stdout_capture.render(out_budget)[0], self.stderr_capture.render(err_budget)[0]


def run_command(
    spec: CommandSpec,
    *,
    timeout: float,
    output_limit: int,
    stdin: bytes | None = None,
    track: Callable[[Pump], AbstractContextManager[None]] | None = None,
) -> CommandResult:
    """Run `spec` to its end, keeping the head and tail (`output_limit` bytes each) of both streams.

    stdin is /dev/null unless `stdin` is given, in which case it is written and then closed.
    `track` (e.g. `ProcessTable.foreground`) holds the running command so its owner can stop it.
    """
    out, err = HeadTail(output_limit), HeadTail(output_limit)
    started = time.monotonic()
    proc = spawn(spec, stdin_pipe=stdin is not None)
    pump = Pump(
        proc,
        out.write,
        err.write,
        stdin_data=stdin,
        stoppable=track is not None,
        contained=spec.contained,
        progress=current_progress(),  # a served client that asked hears how long it has run
    )
    with track(pump) if track is not None else contextlib.nullcontext():
        outcome = pump.run(deadline=started + timeout)
    return CommandResult(outcome, out, err, time.monotonic() - started)
