"""A model's batch of 50 read-only calls through run_tool_calls vs calling the router one by one.

Run: python -m pytest benches/bench_agent_batch.py --benchmark-only
Each pair runs side by side in one session; the speed-ups (one-by-one / batch, by min and by median;
the mean swings with every preempted round on a shared machine) are printed at the end and stored
in the batch benchmark's extra_info.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute.agent import AgentToolCall, ToolCallRunner, allow_all

CALLS = 50
FILES = 50
TIMES: dict[str, tuple[float, float]] = {}  # name -> (min, median) seconds


def record(benchmark: Any, key: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        TIMES[key] = (stats.stats.min, stats.stats.median)


def ratios(baseline: str, key: str) -> tuple[float, float]:
    (base_min, base_median), (min_, median) = TIMES[baseline], TIMES[key]
    return base_min / min_, base_median / median


def speedup(benchmark: Any, baseline: str, key: str) -> None:
    record(benchmark, key)
    if baseline in TIMES and key in TIMES:
        by_min, by_median = ratios(baseline, key)
        benchmark.extra_info["speedup_by_min"] = round(by_min, 2)
        benchmark.extra_info["speedup_by_median"] = round(by_median, 2)


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = []
    pairs = [
        ("builtin one-by-one", "builtin batch"),
        ("function one-by-one", "function batch"),
        ("serial loop", "serial batch"),
    ]
    for baseline, key in pairs:
        if baseline in TIMES and key in TIMES:
            by_min, by_median = ratios(baseline, key)
            lines.append(
                f"[agent] {key} vs {baseline}: min {TIMES[key][0] * 1e3:.2f} vs {TIMES[baseline][0] * 1e3:.2f} ms "
                f"(speed-up {by_min:.2f}x), median {TIMES[key][1] * 1e3:.2f} vs {TIMES[baseline][1] * 1e3:.2f} ms "
                f"(speed-up {by_median:.2f}x)"
            )
    if reporter is not None and capture is not None and lines:
        with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agent_bench")
    for i in range(FILES):
        pkg = root / f"pkg{i % 5}"
        pkg.mkdir(exist_ok=True)
        body = "".join(f"def f{i}_{j}(x):\n    return x + {j}  # TODO item {j}\n" for j in range(2000))
        (pkg / f"mod{i}.py").write_text(body)
    return root


def one_by_one(router: ToolRouter, calls: list[AgentToolCall]) -> Callable[[], list[str]]:
    """What a host does without the agent layer: invoke each call in turn."""
    return lambda: [router.invoke(c.name, c.arguments) for c in calls]


# ---- built-ins: read_file / grep / glob ------------------------------------------------------

BUILTINS = ("read_file", "grep", "glob")


def builtin_calls() -> list[AgentToolCall]:
    calls = []
    for i in range(CALLS):
        if i % 5 == 3:
            calls.append(AgentToolCall("grep", json.dumps({"pattern": rf"item 1{i}\d", "path": f"pkg{i % 5}"})))
        elif i % 5 == 4:
            calls.append(AgentToolCall("glob", json.dumps({"pattern": f"pkg{i % 5}/*.py"})))
        else:
            calls.append(AgentToolCall("read_file", json.dumps({"path": f"pkg{i % 5}/mod{i}.py", "limit": 2000})))
    return calls


@pytest.fixture(scope="module")
def builtin_router(tree: Path) -> Iterator[ToolRouter]:
    with ToolRouter(context=BuiltInToolContext(tree)) as router:
        yield router


@pytest.mark.benchmark(group="agent: 50 read-only built-in calls (grep/glob/read_file)")
def test_builtin_one_by_one(benchmark: Any, builtin_router: ToolRouter) -> None:
    outputs = benchmark(one_by_one(builtin_router, builtin_calls()))
    assert len(outputs) == CALLS
    record(benchmark, "builtin one-by-one")


@pytest.mark.benchmark(group="agent: 50 read-only built-in calls (grep/glob/read_file)")
def test_builtin_batch_toolroute(benchmark: Any, builtin_router: ToolRouter) -> None:
    runner = ToolCallRunner(builtin_router, policy=allow_all())
    calls = builtin_calls()
    results = benchmark(runner.run, calls)
    assert not any(r.is_error for r in results), [r.output for r in results if r.is_error][:3]
    speedup(benchmark, "builtin one-by-one", "builtin batch")


# ---- function tools doing real file I/O (runs on every branch) --------------------------------


@pytest.fixture(scope="module")
def function_router(tree: Path) -> ToolRouter:
    router = ToolRouter()

    @function_tool(name="digest_file", read_only=True, idempotent=True)
    def digest_file(path: str) -> dict[str, Any]:
        data = (tree / path).read_bytes()
        return {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    @function_tool(name="append_line")
    def append_line(path: str, line: str) -> str:
        with (tree / path).open("a") as f:
            f.write(line + "\n")
        return "ok"

    router.register(digest_file)
    router.register(append_line)
    return router


def digest_calls() -> list[AgentToolCall]:
    return [AgentToolCall("digest_file", json.dumps({"path": f"pkg{i % 5}/mod{i}.py"})) for i in range(CALLS)]


@pytest.mark.benchmark(group="agent: 50 read-only function tools (read + hash)")
def test_function_one_by_one(benchmark: Any, function_router: ToolRouter) -> None:
    outputs = benchmark(one_by_one(function_router, digest_calls()))
    assert len(outputs) == CALLS
    record(benchmark, "function one-by-one")


@pytest.mark.benchmark(group="agent: 50 read-only function tools (read + hash)")
def test_function_batch_toolroute(benchmark: Any, function_router: ToolRouter) -> None:
    runner = ToolCallRunner(function_router)
    results = benchmark(runner.run, digest_calls())
    assert not any(r.is_error for r in results)
    speedup(benchmark, "function one-by-one", "function batch")


# ---- the price of the layer on side-effecting calls (all serial) ------------------------------


def append_calls() -> list[AgentToolCall]:
    return [AgentToolCall("append_line", json.dumps({"path": "log.txt", "line": f"entry {i}"})) for i in range(CALLS)]


@pytest.mark.benchmark(group="agent: 50 side-effecting calls (serial)")
def test_serial_loop(benchmark: Any, function_router: ToolRouter) -> None:
    benchmark(one_by_one(function_router, append_calls()))
    record(benchmark, "serial loop")


@pytest.mark.benchmark(group="agent: 50 side-effecting calls (serial)")
def test_serial_batch_toolroute(benchmark: Any, function_router: ToolRouter) -> None:
    runner = ToolCallRunner(function_router)
    results = benchmark(runner.run, append_calls())
    assert [r.output for r in results] == ["ok"] * CALLS
    speedup(benchmark, "serial loop", "serial batch")
