"""Issue 5 and 12 benchmarks: bash `exec` against `subprocess.run` with the same shell, unsandboxed
and under bubblewrap (and Landlock), the cost of polling `logs`, and the host CPU a chatty
background process costs, side by side in one run. Ratios are printed at the end of the module.

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

from toolroute.builtins._process import CommandSpec, command_environment, pump, run_command
from toolroute.builtins._process.pump import bash_path
from toolroute.builtins._process.sandbox import SandboxPlan, SandboxUnavailable, bubblewrap_argv, resolve_kind
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

WORKSPACE = Path(tempfile.mkdtemp(prefix="toolroute-bench-bash-")).resolve()
ROUTER = ToolRouter(context=BuiltInToolContext(WORKSPACE))
BASH = bash_path()
MEANS: dict[str, dict[str, float]] = {}
INTERLEAVED: dict[str, tuple[float, float, float, float]] = {}
SANDBOX_LINES: list[str] = []
LOG_BYTES = 1 << 20


def _available(kind: str) -> bool:
    try:
        return resolve_kind(kind) == kind  # type: ignore[arg-type]
    except SandboxUnavailable:
        return False


BWRAP = _available("bubblewrap")
LANDLOCK = _available("landlock")
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot run here")


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
    lines.extend(SANDBOX_LINES)
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


# ---- sandboxed exec -------------------------------------------------------------------------


def _sandboxed_router(kind: str) -> ToolRouter:
    return ToolRouter(context=BuiltInToolContext(WORKSPACE, sandbox=kind))  # type: ignore[arg-type]


def _bwrap_argv(command: str) -> list[str]:
    """What a user would hand-write: the same bwrap confinement around the same shell."""
    plan = SandboxPlan("bubblewrap", WORKSPACE, Path(tempfile.gettempdir()))
    return bubblewrap_argv([BASH, "-c", command], plan, WORKSPACE)


@needs_bwrap
def test_exec_bwrap_toolroute(benchmark: Any) -> None:
    router = _sandboxed_router("bubblewrap")
    try:
        assert json.loads(router.invoke("bash", {"command": "true"}))["sandbox"]["confinement"] == "bubblewrap"
        measured(
            "exec 'true' under bubblewrap",
            "toolroute invoke",
            benchmark,
            lambda: router.invoke("bash", {"command": "true"}),
        )
    finally:
        router.close()


@needs_bwrap
def test_exec_bwrap_subprocess_run(benchmark: Any) -> None:
    argv = _bwrap_argv("true")
    assert subprocess.run(argv, capture_output=True, timeout=60).returncode == 0
    measured(
        "exec 'true' under bubblewrap",
        "baseline",
        benchmark,
        lambda: subprocess.run(argv, cwd=WORKSPACE, capture_output=True, timeout=60, stdin=subprocess.DEVNULL),
    )


@needs_bwrap
def test_exec_sandbox_interleaved(benchmark: Any) -> None:
    """One round runs each variant once, so machine load hits all alike; medians are compared."""
    routers = {"unsandboxed": ROUTER, "bubblewrap": _sandboxed_router("bubblewrap")}
    if LANDLOCK:
        routers["landlock"] = _sandboxed_router("landlock")
    times: dict[str, list[float]] = {name: [] for name in [*routers, "subprocess.run", "subprocess.run bwrap"]}
    plain, boxed = [BASH, "-c", "true"], _bwrap_argv("true")

    def timed(name: str, fn: Callable[[], object]) -> None:
        t0 = time.perf_counter()
        fn()
        times[name].append(time.perf_counter() - t0)

    def round_() -> None:
        for name, router in routers.items():
            timed(name, lambda r=router: r.invoke("bash", {"command": "true"}))  # type: ignore[misc]
        timed("subprocess.run", lambda: subprocess.run(plain, capture_output=True, stdin=subprocess.DEVNULL))
        timed("subprocess.run bwrap", lambda: subprocess.run(boxed, capture_output=True, stdin=subprocess.DEVNULL))

    benchmark.group = "exec 'true' sandboxed, interleaved (all variants per round)"
    try:
        benchmark.pedantic(round_, rounds=60, warmup_rounds=3)
    finally:
        for router in routers.values():
            if router is not ROUTER:
                router.close()
    med = {name: statistics.median(values) for name, values in times.items()}
    base = med["subprocess.run"]
    SANDBOX_LINES.append("  exec 'true' interleaved medians (ratio to subprocess.run of bash -c true):")
    for name, value in med.items():
        SANDBOX_LINES.append(f"    {name:22s} {value * 1e3:7.2f} ms  {value / base:5.2f}x")
    SANDBOX_LINES.append(
        f"    bubblewrap start-up through toolroute: +{(med['bubblewrap'] - med['unsandboxed']) * 1e3:.2f} ms over "
        f"unsandboxed; bwrap by hand: +{(med['subprocess.run bwrap'] - base) * 1e3:.2f} ms over subprocess.run"
    )


# ---- background output pumping ----------------------------------------------------------------


def _host_cpu_share(paced: bool, seconds: float = 1.5) -> tuple[float, float]:
    """(host CPU as a fraction of one core, MiB/s drained) while `yes` runs in the background."""
    original = pump.Pump.__init__

    def init(self: pump.Pump, *args: Any, **kwargs: Any) -> None:
        kwargs["paced"] = paced and kwargs.get("paced", False)
        original(self, *args, **kwargs)

    pump.Pump.__init__ = init  # type: ignore[method-assign]
    try:
        pid = _invoke({"action": "start", "command": "yes"})["processId"]
    finally:
        pump.Pump.__init__ = original  # type: ignore[method-assign]
    try:
        time.sleep(0.3)
        b0 = _invoke({"action": "status", "process_id": pid})["stdoutBytes"]
        c0, t0 = time.process_time(), time.perf_counter()
        time.sleep(seconds)
        c1, t1 = time.process_time(), time.perf_counter()
        b1 = _invoke({"action": "status", "process_id": pid})["stdoutBytes"]
    finally:
        _invoke({"action": "stop", "process_id": pid})
    return (c1 - c0) / (t1 - t0), (b1 - b0) / (t1 - t0) / 2**20


def test_background_pump_cpu(benchmark: Any) -> None:
    """Before (unpaced: read every write as it comes) and after (paced), alternating."""
    shares: dict[bool, list[tuple[float, float]]] = {False: [], True: []}

    def round_() -> None:
        for paced in (False, True):
            shares[paced].append(_host_cpu_share(paced))

    benchmark.group = "background pump CPU with `yes` (unpaced and paced per round)"
    benchmark.pedantic(round_, rounds=3, warmup_rounds=0)
    for paced, label in ((False, "before (unpaced)"), (True, "after (paced)")):
        cpu = statistics.median(c for c, _ in shares[paced])
        rate = statistics.median(r for _, r in shares[paced])
        SANDBOX_LINES.append(
            f"  host CPU while `yes` runs in the background, {label}: {cpu:.1%} of a core, {rate:.0f} MiB/s drained"
        )
