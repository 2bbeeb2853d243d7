"""Interleaved comparisons: toolroute and its alternatives alternate round by round in one run.

On a shared, noisy machine, load that comes and goes then hits every side alike, so the ratio
holds still where back-to-back runs flip sign. Before any timing, every side runs once and its
result must equal toolroute's (like for like); a mismatch fails the benchmark with both results.

    results = compare("grep stdlib", ("toolroute", lambda: grep(root)),
                      {"rg (subprocess)": lambda: rg(root)}, rounds=10)

Each round runs every side once, in an order rotated per round. The ratio is the median of the
per-round ratios (alternative time / toolroute time, above 1 = toolroute faster), with the spread
of those ratios (25th to 75th percentile). Results are printed as they come and, when
`TOOLROUTE_INTERLEAVE_OUT` names a file (benches/report.py sets it), appended to it as JSON lines.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

OUT_ENV = "TOOLROUTE_INTERLEAVE_OUT"

Thunk = Callable[[], Any]


@dataclass(frozen=True)
class Measured:
    """What a side returns when it times itself (the part inside a child process, say): its
    `seconds` count instead of the wall time of the call, and `value` is its result."""

    seconds: float
    value: Any


@dataclass(frozen=True)
class Case:
    """One side: `run` is timed; `setup` (not timed) runs before each call, e.g. to restore a file."""

    run: Thunk
    setup: Callable[[], None] | None = None

    def call(self) -> tuple[float, Any]:
        if self.setup is not None:
            self.setup()
        start = time.perf_counter()
        result = self.run()
        elapsed = time.perf_counter() - start
        if isinstance(result, Measured):
            return result.seconds, result.value
        return elapsed, result


@dataclass(frozen=True)
class Result:
    group: str
    toolroute: str
    alternative: str
    toolroute_median_s: float
    alternative_median_s: float
    ratio: float  # median over rounds of alternative time / toolroute time
    ratio_p25: float
    ratio_p75: float
    rounds: int

    def line(self) -> str:
        return (
            f"{self.group}: {self.alternative} / {self.toolroute} = {self.ratio:.2f}x "
            f"[{self.ratio_p25:.2f}-{self.ratio_p75:.2f}] ({_ms(self.alternative_median_s)} vs "
            f"{_ms(self.toolroute_median_s)}, {self.rounds} rounds)"
        )


class NotLikeForLike(AssertionError):
    """Two sides of a comparison gave different results: their times say nothing about each other."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _case(side: Thunk | Case) -> Case:
    return side if isinstance(side, Case) else Case(side)


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def compare(
    group: str,
    toolroute: tuple[str, Thunk | Case],
    alternatives: Mapping[str, Thunk | Case],
    rounds: int,
    *,
    same: Callable[[Any, Any], bool] = lambda a, b: bool(a == b),
    warmup: int = 1,
) -> list[Result]:
    """Check every alternative gives toolroute's result, then time them interleaved."""
    base_name = toolroute[0]
    sides = {base_name: _case(toolroute[1]), **{name: _case(side) for name, side in alternatives.items()}}
    _, expected = sides[base_name].call()
    for name, case in sides.items():
        if name != base_name:
            _, got = case.call()
            if not same(expected, got):
                raise NotLikeForLike(f"{group}: {name} gave {got!r:.200}, {base_name} gave {expected!r:.200}")
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed, _ = sides[name].call()
            if r >= warmup:
                times[name].append(elapsed)
    results = []
    for name in names[1:]:
        ratios = [alt / max(base, 1e-12) for alt, base in zip(times[name], times[base_name], strict=True)]
        low, high = _quartiles(ratios)
        result = Result(
            group,
            base_name,
            name,
            statistics.median(times[base_name]),
            statistics.median(times[name]),
            statistics.median(ratios),
            low,
            high,
            rounds,
        )
        _emit(result)
        results.append(result)
    return results


def _emit(result: Result) -> None:
    print(f"  {result.line()}", file=sys.__stdout__, flush=True)  # progress, past pytest's capture
    path = os.environ.get(OUT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(result)) + "\n")
