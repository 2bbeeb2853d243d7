"""Issue 5 benchmarks: bash `exec` against `subprocess.run` with the same shell, and the cost of
polling `logs`, side by side in one run. Ratios are printed at the end of the module.

Run: python -m pytest benches/bench_bash_exec.py --benchmark-only
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolroute.builtins._process import CommandSpec, command_environment, run_command
from toolroute.builtins._process.pump import bash_path
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

WORKSPACE = Path(tempfile.mkdtemp(prefix="toolroute-bench-bash-")).resolve()
ROUTER = ToolRouter(context=BuiltInToolContext(WORKSPACE))
BASH = bash_path()
MEANS: dict[str, dict[str, float]] = {}
INTERLEAVED: dict[str, tuple[float, float, float, float]] = {}
LOG_BYTES = 1 << 20


def measured(group: str, case: str, benchmark: Any, fn: Callable[[], object]) -> None:
    benchmark.group = group
    benchmark(fn)
    MEANS.setdefault(group, {})[case] = benchmark.stats.stats.mean


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    ROUTER.close()
    shutil.rmtree(WORKSPACE, ignore_errors=True)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["", "bash benchmark ratios (mean time / baseline mean time):"]
    for group, cases in MEANS.items():
        base = cases.get("baseline")
        for case, mean in cases.items():
            if case != "baseline" and base:
                lines.append(f"  {group}: {case} = {mean * 1e3:.3f} ms, {mean / base:.2f}x of baseline")
    for command, (ours, theirs, ours_cpu, theirs_cpu) in INTERLEAVED.items():
        lines.append(
            f"  exec {command!r} interleaved medians: toolroute {ours * 1e3:.3f} ms, subprocess.run "
            f"{theirs * 1e3:.3f} ms, ratio {ours / theirs:.2f}x (target <= 1.2x); parent CPU per call "
            f"{ours_cpu * 1e3:.3f} ms vs {theirs_cpu * 1e3:.3f} ms"
        )
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        for line in lines:
            reporter.write_line(line) if reporter else print(line)


def _invoke(args: dict[str, Any]) -> dict[str, Any]:
    return json.loads(ROUTER.invoke("bash", args))


# ---- exec ---------------------------------------------------------------------------------

SPEC_ENV = command_environment(None)


@pytest.mark.parametrize("command", ["true", "echo hello"])
def test_exec_toolroute(benchmark: Any, command: str) -> None:
    assert _invoke({"command": command})["exitCode"] == 0
    measured(f"exec {command!r}", "toolroute invoke", benchmark, lambda: ROUTER.invoke("bash", {"command": command}))


@pytest.mark.parametrize("command", ["true", "echo hello"])
def test_exec_run_command(benchmark: Any, command: str) -> None:
    """The process plumbing alone, without argument validation and JSON."""
    spec = CommandSpec(command, WORKSPACE, SPEC_ENV)
    measured(
        f"exec {command!r}",
        "run_command (no router)",
        benchmark,
        lambda: run_command(spec, timeout=60, output_limit=30_000),
    )


@pytest.mark.parametrize("command", ["true", "echo hello"])
def test_exec_subprocess_run(benchmark: Any, command: str) -> None:
    """What a user would otherwise write: same shell, captured output, a timeout."""
    measured(
        f"exec {command!r}",
        "baseline",
        benchmark,
        lambda: subprocess.run(
            [BASH, "-c", command], cwd=WORKSPACE, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
        ),
    )


@pytest.mark.parametrize("command", ["true", "echo hello"])
def test_exec_interleaved_ratio(benchmark: Any, command: str) -> None:
    """The fairest ratio on a shared machine: toolroute and subprocess.run alternate in every
    round, so load drifts hit both alike; medians of each side are compared."""
    ours: list[float] = []
    theirs: list[float] = []
    cpu = [0.0, 0.0]  # this process's CPU time (less noisy than wall time on a shared machine)
    argv = [BASH, "-c", command]

    def pair() -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        ROUTER.invoke("bash", {"command": command})
        t1, c1 = time.perf_counter(), time.process_time()
        subprocess.run(argv, cwd=WORKSPACE, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        t2, c2 = time.perf_counter(), time.process_time()
        ours.append(t1 - t0)
        theirs.append(t2 - t1)
        cpu[0] += c1 - c0
        cpu[1] += c2 - c1

    benchmark.group = f"exec {command!r} interleaved (toolroute + subprocess.run per round)"
    benchmark.pedantic(pair, rounds=300, warmup_rounds=10)
    INTERLEAVED[command] = (statistics.median(ours), statistics.median(theirs), cpu[0] / len(ours), cpu[1] / len(ours))


# ---- logs polling -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chatty() -> str:
    """A running process whose stdout ring is full (1 MiB), also mirrored to a log file."""
    command = f"head -c {LOG_BYTES} /dev/zero | tr '\\0' x | tee out.log; exec sleep 600"
    pid = _invoke({"action": "start", "command": command})["processId"]
    deadline = time.monotonic() + 60
    while _invoke({"action": "status", "process_id": pid})["stdoutBytes"] < LOG_BYTES:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return pid


def test_logs_poll_toolroute(benchmark: Any, chatty: str) -> None:
    """An agent's poll: the newest 12,000 bytes of a live process through the router."""
    args = {"action": "logs", "process_id": chatty, "stream": "stdout"}
    assert len(_invoke(args)["stdout"]["content"]) == 12_000
    measured("logs poll (12,000 bytes)", "toolroute logs", benchmark, lambda: ROUTER.invoke("bash", args))


def test_logs_status_toolroute(benchmark: Any, chatty: str) -> None:
    args = {"action": "status", "process_id": chatty}
    measured("logs poll (12,000 bytes)", "toolroute status", benchmark, lambda: ROUTER.invoke("bash", args))


def test_logs_poll_exec_tail(benchmark: Any, chatty: str) -> None:
    """The alternative without logs: the command writes a file, the agent runs `tail` on it."""
    args = {"command": "tail -c 12000 out.log"}
    measured("logs poll (12,000 bytes)", "exec tail -c", benchmark, lambda: ROUTER.invoke("bash", args))


def test_logs_poll_file_read(benchmark: Any, chatty: str) -> None:
    """The floor: reading the tail of a log file in-process."""
    path = WORKSPACE / "out.log"

    def read_tail() -> bytes:
        with path.open("rb") as f:
            f.seek(-12_000, 2)
            return f.read()

    measured("logs poll (12,000 bytes)", "baseline", benchmark, read_tail)
