"""`toolroute bench` and benches/report.py: one pytest run, ratios per group, JSON, Markdown, PNG."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _serve_helpers import run_cli

REPORT_SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "report.py"

DEMO_BENCH = """
import time
import pytest


def work(n):
    return sum(range(n))


@pytest.mark.benchmark(group="sum")
def test_sum_toolroute(benchmark):
    benchmark.pedantic(work, args=(10,), rounds=3, iterations=1)


@pytest.mark.benchmark(group="sum")
def test_sum_naive(benchmark):
    benchmark.pedantic(work, args=(200_000,), rounds=3, iterations=1)


def test_sum_interleaved():
    from _interleave import compare

    # Same result on both sides (a sum of 0..n-1 modulo 7), 20000x the work on the alternative.
    fast, slow = (lambda: sum(range(10)) % 7), (lambda: sum(range(200_000)) % 7)
    assert fast() == slow()
    compare("sum interleaved", ("toolroute", fast), {"naive": slow}, rounds=5)


@pytest.mark.benchmark(group="lonely")
def test_lonely_alternative(benchmark):
    benchmark.pedantic(work, args=(10,), rounds=3, iterations=1)
"""

FAILING_BENCH = """
def test_broken_toolroute(benchmark):
    benchmark.pedantic(lambda: 1 / 0, rounds=1, iterations=1)
"""


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", REPORT_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def bench(name: str, group: str | None, median: float) -> dict:
    return {"name": name, "group": group, "stats": {"median": median, "mean": median, "min": median, "rounds": 3}}


def test_summarize_compares_each_alternative_with_the_toolroute_case() -> None:
    report = load_report()
    data = {
        "benchmarks": [
            bench("test_grep[ripgrep]", "grep", 3.0),
            bench("test_grep[toolroute]", "grep", 1.5),
            bench("test_grep[python_re]", "grep", 0.75),
            bench("test_alone", None, 1.0),
            bench("test_glob_ToolRoute", "glob", 2.0),
        ]
    }
    grep, alone, glob = report.summarize(data)
    assert grep.group == "grep" and grep.toolroute.name == "test_grep[toolroute]"
    assert [(c.alternative.name, c.ratio) for c in grep.comparisons] == [
        ("test_grep[ripgrep]", 2.0),
        ("test_grep[python_re]", 0.5),
    ]
    assert [c.verdict for c in grep.comparisons] == ["toolroute 2.00x faster", "toolroute 2.00x slower"]
    assert (alone.group, alone.toolroute, alone.comparisons[0].ratio) == ("test_alone", None, None)
    assert glob.toolroute.name == "test_glob_ToolRoute" and glob.comparisons == []
    table = report.render_table([grep, alone, glob]).splitlines()
    assert table[1].split() == ["grep*", "test_grep[ripgrep]", "1.5", "s", "/", "3", "s", "2.00x", "-"]
    assert table[2].split()[-2:] == ["0.50x", "-"] and table[4].endswith("nothing to compare")
    assert max(map(len, table)) <= 100
    markdown = report.render_markdown([grep])
    assert markdown.splitlines()[0].startswith("| GROUP |") and "| 2.00x |" in markdown


@pytest.fixture
def benches(tmp_path: Path) -> Path:
    directory = tmp_path / "benches"
    directory.mkdir()
    shutil.copy(REPORT_SCRIPT, directory / "report.py")
    shutil.copy(REPORT_SCRIPT.with_name("_interleave.py"), directory / "_interleave.py")
    (directory / "bench_demo.py").write_text(DEMO_BENCH)
    return directory


def test_toolroute_bench_runs_every_file_and_writes_the_report(benches: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("bench", "--benches", str(benches), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RATIO" in proc.stdout and "sum interleaved" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    groups = {g["group"]: g for g in report["groups"]}
    assert set(groups) == {"sum", "lonely", "sum interleaved"}
    (slow,) = groups["sum interleaved"]["alternatives"]
    assert groups["sum interleaved"]["interleaved"] and slow["ratio"] > 1 and len(slow["spread"]) == 2
    (naive,) = groups["sum"]["alternatives"]
    assert groups["sum"]["toolroute"]["name"] == "test_sum_toolroute"
    assert naive["name"] == "test_sum_naive" and naive["ratio"] > 1  # 20000x the work
    assert groups["lonely"]["toolroute"] is None
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "report.md").read_text().startswith("| GROUP |")
    assert json.loads((out / "benchmarks.json").read_text())["benchmarks"]


def test_a_failing_bench_fails_the_run_but_the_rest_is_reported(benches: Path, tmp_path: Path) -> None:
    (benches / "bench_broken.py").write_text(FAILING_BENCH)
    out = tmp_path / "out"
    proc = run_cli("bench", "--benches", str(benches), "--out", str(out), "-k", "sum or broken", "--no-plot")
    assert proc.returncode == 4  # EXIT_TOOL_FAILED: it ran, and something failed
    assert "some benchmarks failed" in proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert [g["group"] for g in report["groups"]] == ["sum interleaved", "sum"]  # -k: the sum groups (+ broken)
    assert not (out / "report.png").exists()  # --no-plot


def test_without_pytest_benchmark_bench_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], benches: Path
) -> None:
    from toolroute import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytest_benchmark" else real(name, *a)
    )
    code = cli.main(["bench", "--benches", str(benches)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    assert err.splitlines() == ["toolroute: error: bench needs pytest_benchmark: pip install 'toolroute[bench]'"]


def test_a_comparison_of_different_results_is_refused() -> None:
    sys.path.insert(0, str(REPORT_SCRIPT.parent))
    try:
        from _interleave import NotLikeForLike, compare
    finally:
        sys.path.remove(str(REPORT_SCRIPT.parent))
    with pytest.raises(NotLikeForLike, match="other gave 2, toolroute gave 1"):
        compare("g", ("toolroute", lambda: 1), {"other": lambda: 2}, rounds=3)
    (result,) = compare("g", ("toolroute", lambda: 1), {"same": lambda: 1}, rounds=3)
    assert (result.alternative, result.rounds) == ("same", 3) and result.ratio_p25 <= result.ratio <= result.ratio_p75
