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
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BASELINE_MARK = "toolroute"
EXIT_BENCH_FAILED = 1
EXIT_NOTHING_TO_REPORT = 3


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


def table_rows(reports: list[GroupReport]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("GROUP", "TOOLROUTE CASE", "MEDIAN", "ALTERNATIVE", "MEDIAN", "RATIO", "VERDICT")]
    for report in reports:
        base = report.toolroute
        base_cells = (base.name, _duration(base.median_s)) if base else ("-", "-")
        if not report.comparisons:
            rows.append((report.group, *base_cells, "-", "-", "-", "nothing to compare"))
        for c in report.comparisons:
            ratio = f"{c.ratio:.2f}" if c.ratio is not None else "-"
            rows.append(
                (report.group, *base_cells, c.alternative.name, _duration(c.alternative.median_s), ratio, c.verdict)
            )
    return rows


def render_table(reports: list[GroupReport]) -> str:
    rows = table_rows(reports)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def render_markdown(reports: list[GroupReport]) -> str:
    header, *body = table_rows(reports)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def report_json(reports: list[GroupReport], data: dict[str, Any]) -> dict[str, Any]:
    machine = data.get("machine_info", {})
    return {
        "ratio": "alternative median / toolroute median (above 1: toolroute is faster)",
        "datetime": data.get("datetime"),
        "machine": {k: machine.get(k) for k in ("node", "processor", "machine", "python_version", "cpu")},
        "groups": [
            {
                "group": r.group,
                "toolroute": asdict(r.toolroute) if r.toolroute else None,
                "alternatives": [{**asdict(c.alternative), "ratio": c.ratio} for c in r.comparisons],
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
    bars = [(f"{r.group}: {c.alternative.name}", c.ratio) for r in reports for c in r.comparisons if c.ratio]
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
    ax.set_title("toolroute vs alternatives (median per benchmark)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_files(benches: Path) -> list[Path]:
    return sorted(benches.glob("bench_*.py"))


def run_suite(files: list[Path], json_path: Path, k: str | None = None) -> int:
    """All bench files in ONE pytest process, so every comparison shares the same conditions."""
    command = [
        sys.executable, "-m", "pytest", *map(str, files),
        "--benchmark-only", f"--benchmark-json={json_path}", "-q",
        "-p", "no:cacheprovider",
        # Plugins that only slow startup here (seconds of imports): LangSmith tracking, Hypothesis
        # reporting (hypothesis itself still works without its plugin).
        "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest",
    ]  # fmt: skip
    if k:
        command += ["-k", k]
    return subprocess.call(command, cwd=files[0].parent.parent if files else None)


def write_report(data: dict[str, Any], out: Path, *, with_plot: bool = True) -> list[GroupReport]:
    reports = summarize(data)
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
        status = run_suite(files, json_path, args.k)
    if not json_path.is_file():
        print(f"report: pytest produced no benchmark data (exit {status})", file=sys.stderr)
        return status or EXIT_NOTHING_TO_REPORT
    reports = write_report(json.loads(json_path.read_text()), out, with_plot=not args.no_plot)
    print(render_table(reports))
    print(f"\nratio = alternative median / toolroute median; written to {out}")
    if status != 0:
        print(f"report: some benchmarks failed (pytest exit {status}); the report covers the rest", file=sys.stderr)
        return EXIT_BENCH_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
