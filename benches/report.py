"""The benchmark report: every `benches/bench_*.py` in one pytest run, compared per group.

Convention for bench authors: give each comparison a pytest-benchmark `group`, and put
`toolroute` in the name of the toolroute case (e.g. `test_grep[toolroute]`, `test_grep_toolroute`).
Every other case of the group is an alternative; its ratio is `alternative median / toolroute
median`, so 3.0 means toolroute is three times as fast.

    python benches/report.py --out bench-report        # or: toolroute bench --out bench-report

writes `benchmarks.json` (pytest-benchmark's raw data), `report.json`, `report.md` and
`report.png` (matplotlib, the `plot` extra) to the output directory and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BASELINE_MARK = "toolroute"
INTERLEAVED = "interleaved.jsonl"  # what benches/_interleave.py appends to, beside benchmarks.json
OUT_ENV = "TOOLROUTE_INTERLEAVE_OUT"  # _interleave.OUT_ENV (this script also runs alone, without benches/)
# The command line's codes (toolroute.cli): 4 "ran and failed", 2 "bad usage" (nothing to run).
EXIT_BENCH_FAILED = 4
EXIT_NOTHING_TO_REPORT = 2


@dataclass(frozen=True)
class Entry:
    name: str
    median_s: float
    mean_s: float
    min_s: float
    rounds: int

    @classmethod
    def from_benchmark(cls, bench: dict[str, Any]) -> Entry:
        stats = bench["stats"]
        return cls(bench["name"], stats["median"], stats["mean"], stats["min"], int(stats.get("rounds", 0)))


@dataclass(frozen=True)
class Comparison:
    alternative: Entry
    ratio: float | None  # alternative median / toolroute median; None without a baseline
    spread: tuple[float, float] | None = None  # 25th-75th percentile of per-round ratios (interleaved)

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "no toolroute case in group"
        if self.ratio >= 1:
            return f"toolroute {self.ratio:.2f}x faster"
        return f"toolroute {1 / self.ratio:.2f}x slower"


@dataclass(frozen=True)
class GroupReport:
    group: str
    toolroute: Entry | None
    comparisons: list[Comparison] = field(default_factory=list)
    interleaved: bool = False  # False: pytest-benchmark ran the sides one after the other


def from_interleaved(lines: list[dict[str, Any]]) -> list[GroupReport]:
    """The comparisons benches/_interleave.py recorded (one JSON object per alternative)."""
    groups: dict[str, GroupReport] = {}
    for r in lines:
        base = Entry(r["toolroute"], r["toolroute_median_s"], r["toolroute_median_s"], 0.0, r["rounds"])
        alt = Entry(r["alternative"], r["alternative_median_s"], r["alternative_median_s"], 0.0, r["rounds"])
        report = groups.setdefault(r["group"], GroupReport(r["group"], base, [], interleaved=True))
        report.comparisons.append(Comparison(alt, r["ratio"], (r["ratio_p25"], r["ratio_p75"])))
    return list(groups.values())


def _is_baseline(name: str) -> bool:
    return BASELINE_MARK in name.lower()


def summarize(data: dict[str, Any]) -> list[GroupReport]:
    """Group pytest-benchmark results and compare each alternative with the toolroute case.

    An ungrouped benchmark forms a group of its own (named after it). With several toolroute
    cases in one group, the first one is the baseline and the others are compared to it.
    """
    groups: dict[str, list[Entry]] = {}
    for bench in data.get("benchmarks", []):
        groups.setdefault(bench.get("group") or bench["name"], []).append(Entry.from_benchmark(bench))
    reports = []
    for group, entries in groups.items():
        baseline = next((e for e in entries if _is_baseline(e.name)), None)
        comparisons = [
            Comparison(e, e.median_s / baseline.median_s if baseline and baseline.median_s > 0 else None)
            for e in entries
            if e is not baseline
        ]
        reports.append(GroupReport(group, baseline, comparisons))
    return reports


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


GROUP_WIDTH, NAME_WIDTH = 32, 24  # so the printed table fits in about 100 columns


def _cut(text: str, width: int) -> str:
    """Cut in the middle: names differ at the end as often as at the start ("... (grep/glob)")."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "~" + text[len(text) - (width - 1 - head) :]


def table_rows(reports: list[GroupReport], width: bool = True) -> list[tuple[str, ...]]:
    """GROUP, ALTERNATIVE, times (toolroute / alternative), RATIO, SPREAD; `*` = not interleaved."""
    cut = _cut if width else (lambda text, _: text)
    rows: list[tuple[str, ...]] = [("GROUP", "ALTERNATIVE", "TOOLROUTE / ALT", "RATIO", "SPREAD")]
    for report in reports:
        group = cut(report.group, GROUP_WIDTH - 1) + ("" if report.interleaved else "*")
        base = report.toolroute
        if not report.comparisons:
            rows.append((group, "-", _duration(base.median_s) if base else "-", "-", "nothing to compare"))
        for c in report.comparisons:
            times = f"{_duration(base.median_s) if base else '-'} / {_duration(c.alternative.median_s)}"
            ratio = f"{c.ratio:.2f}x" if c.ratio is not None else "-"
            spread = f"{c.spread[0]:.2f}-{c.spread[1]:.2f}" if c.spread else "-"
            rows.append((group, cut(c.alternative.name, NAME_WIDTH), times, ratio, spread))
    return rows


LEGEND = (
    "RATIO = alternative time / toolroute time (above 1: toolroute is faster), the median of per-round\n"
    "ratios; SPREAD = their 25th to 75th percentile. * = not interleaved (pytest-benchmark, one side\n"
    "after the other): read such ratios as rough."
)


def render_table(reports: list[GroupReport]) -> str:
    rows = table_rows(reports)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def render_markdown(reports: list[GroupReport]) -> str:
    header, *body = table_rows(reports, width=False)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n\n" + LEGEND + "\n"


def report_json(reports: list[GroupReport], data: dict[str, Any]) -> dict[str, Any]:
    here = {"machine": platform.machine(), "python_version": platform.python_version(), "cpus": os.cpu_count()}
    return {
        "ratio": "alternative time / toolroute time, median of per-round ratios (above 1: toolroute is faster)",
        "datetime": data.get("datetime") or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**here, **{k: v for k, v in data.get("machine_info", {}).items() if k in here}},
        "groups": [
            {
                "group": r.group,
                "interleaved": r.interleaved,
                "toolroute": asdict(r.toolroute) if r.toolroute else None,
                "alternatives": [
                    {**asdict(c.alternative), "ratio": c.ratio, "spread": c.spread} for c in r.comparisons
                ],
            }
            for r in reports
        ],
    }


def plot(reports: list[GroupReport], path: Path) -> None:
    """A horizontal bar per (group, alternative): how many times faster toolroute is (log scale)."""
    try:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("the chart needs matplotlib: pip install 'toolroute[plot]'") from exc
    bars = [
        (f"{r.group}{'' if r.interleaved else '*'}: {c.alternative.name}", c.ratio)
        for r in reports
        for c in r.comparisons
        if c.ratio
    ]
    fig, ax = plt.subplots(figsize=(10, max(2.0, 0.45 * len(bars) + 1.2)))
    if bars:
        labels, ratios = zip(*bars, strict=True)
        colors = ["tab:green" if ratio >= 1 else "tab:red" for ratio in ratios]
        # Bars grow from 1 (parity) outwards, so "slower" reads as clearly as "faster".
        ax.barh(range(len(bars)), [abs(r - 1) for r in ratios], left=[min(r, 1) for r in ratios], color=colors)
        ax.set_yticks(range(len(bars)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        span = max(max(ratios), 1 / min(ratios), 1.5) * 1.6
        ax.set_xlim(1 / span, span)
        ticks = [t for t in (0.01, 0.1, 0.25, 0.5, 1, 2, 4, 10, 100, 1000) if 1 / span <= t <= span]
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}x"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.axvline(1.0, color="black", linewidth=0.8)
        for i, ratio in enumerate(ratios):
            ax.text(
                ratio,
                i,
                f" {ratio:.2f}x " if ratio >= 1 else f"{ratio:.2f}x ",
                va="center",
                ha="left" if ratio >= 1 else "right",
                fontsize=7,
            )
    else:
        ax.text(0.5, 0.5, "no comparisons", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("alternative time / toolroute time (log scale; right of 1 = toolroute faster)")
    ax.set_title("toolroute vs alternatives (interleaved: median of per-round ratios; * = not interleaved)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_files(benches: Path) -> list[Path]:
    return sorted(benches.glob("bench_*.py"))


def run_suite(files: list[Path], json_path: Path, interleaved_path: Path, k: str | None = None) -> int:
    """All bench files in ONE pytest process, so every comparison shares the same conditions."""
    command = [
        sys.executable, "-m", "pytest", *map(str, files),
        f"--benchmark-json={json_path}", "--benchmark-quiet",  # our table replaces pytest-benchmark's
        "-q", "-rs", "--no-header", "-p", "no:cacheprovider",
        "--capture=sys",  # leaves the real stdout to _interleave's progress lines
        # Plugins that only slow startup here (seconds of imports): LangSmith tracking, Hypothesis
        # reporting (hypothesis itself still works without its plugin).
        "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest",
    ]  # fmt: skip
    if k:
        command += ["-k", k]
    env = {**os.environ, OUT_ENV: str(interleaved_path)}
    return subprocess.call(command, cwd=files[0].parent.parent if files else None, env=env)


def write_report(
    data: dict[str, Any], out: Path, *, with_plot: bool = True, interleaved: Sequence[dict[str, Any]] = ()
) -> list[GroupReport]:
    reports = from_interleaved(list(interleaved)) + summarize(data)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report_json(reports, data), indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(reports))
    if with_plot:
        try:
            plot(reports, out / "report.png")
        except ImportError as exc:
            print(f"report: {exc}; skipping the chart", file=sys.stderr)
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benches", type=Path, default=Path(__file__).resolve().parent, help="bench directory")
    parser.add_argument("--out", type=Path, default=Path("bench-report"), help="output directory")
    parser.add_argument("-k", metavar="EXPR", help="only benchmarks matching this pytest -k expression")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    parser.add_argument("--from-json", type=Path, help="report on an existing --benchmark-json file, run nothing")
    args = parser.parse_args(argv)

    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    status = 0
    if args.from_json:
        json_path = args.from_json
    else:
        files = bench_files(args.benches.resolve())
        if not files:
            print(f"report: no bench_*.py files in {args.benches}", file=sys.stderr)
            return EXIT_NOTHING_TO_REPORT
        json_path = out / "benchmarks.json"
        json_path.unlink(missing_ok=True)
        json_path.with_name(INTERLEAVED).unlink(missing_ok=True)
        print(f"report: running {len(files)} bench files; each comparison prints its ratio as it ends", flush=True)
        status = run_suite(files, json_path, json_path.with_name(INTERLEAVED), args.k)
    interleaved_path = json_path.with_name(INTERLEAVED)
    lines = interleaved_path.read_text().splitlines() if interleaved_path.is_file() else []
    interleaved = [json.loads(line) for line in lines]
    data = json.loads(json_path.read_text()) if json_path.is_file() else {}
    if not interleaved and not data.get("benchmarks"):
        print(f"report: pytest produced no benchmark data (exit {status})", file=sys.stderr)
        return EXIT_NOTHING_TO_REPORT
    reports = write_report(data, out, with_plot=not args.no_plot, interleaved=interleaved)
    print()
    print(render_table(reports))
    print(f"\n{LEGEND}\nwritten to {out}")
    if status != 0:
        print(f"report: some benchmarks failed (pytest exit {status}); the report covers the rest", file=sys.stderr)
        return EXIT_BENCH_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
