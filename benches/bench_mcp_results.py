"""Issue 11 benchmarks: what containment costs on the result path, interleaved with the
alternative in every round (A then B, medians compared) so load drift on a shared machine hits
both alike.

- neutralising 1 MB of text: toolroute's Rust scan vs the plain-Python regex a user would write
  (same output, checked), on clean text and on text dense with ANSI escapes;
- converting an MCP result: today's conversion (join every block, no cap, no neutralising) vs
  the capped, neutralised one, for a 50 KB result (under the cap: same text, checked) and ten
  1 MB blocks (capped: the texts differ by design; today's passes all 10 MB on to the model).
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import mcp_types as types
import pytest

from toolroute.mcp.results import content_text
from toolroute.textsafety import neutralize

RESULTS: dict[str, tuple[float, float, str, str]] = {}

# The same set as rust/textsafety/src/lib.rs, as one Python character class.
_RANGES = [
    (0x00, 0x08), (0x0B, 0x0C), (0x0E, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C),
    (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200B),
    (0x200E, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xE0100, 0xE01EF),
]  # fmt: skip
_PY_UNSAFE = re.compile("(?:[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _RANGES) + "]|\r(?!\n))+")


def _py_escape(match: re.Match[str]) -> str:
    out = []
    for ch in match.group():
        cp = ord(ch)
        out.append(f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}")
    return "".join(out)


def py_neutralize(text: str) -> str:
    return _PY_UNSAFE.sub(_py_escape, text)


def todays_conversion(content: list[Any]) -> str:
    """What the gateway did before: every text block joined whole."""
    return "\n".join(b.text for b in content)


CLEAN = ('plain tool output with some JSON {"id": 12, "name": "x"} and prose.\n' * 20_000)[:1_000_000]
ANSI = ("\x1b[32mok\x1b[0m test_case passed \u202eflag\u202c\n" * 30_000)[:1_000_000]
SMALL = [types.TextContent(text=CLEAN[:25_000]), types.TextContent(text=CLEAN[25_000:50_000])]
HUGE = [types.TextContent(text=CLEAN) for _ in range(10)]  # ten 1 MB blocks


def interleaved(benchmark: Any, name: str, a: Callable[[], object], b: Callable[[], object], labels: str) -> None:
    ours: list[float] = []
    theirs: list[float] = []

    def pair() -> None:
        t0 = time.perf_counter()
        a()
        t1 = time.perf_counter()
        b()
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        theirs.append(t2 - t1)

    benchmark.group = f"mcp results: {name} (interleaved)"
    benchmark.pedantic(pair, rounds=30, warmup_rounds=2)
    first, second = labels.split(" vs ")
    RESULTS[name] = (statistics.median(ours), statistics.median(theirs), first, second)


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["", "mcp results benchmark (interleaved medians):"]
    for name, (ours, theirs, a, b) in RESULTS.items():
        lines.append(f"  {name}: {a} {ours * 1e3:.3f} ms, {b} {theirs * 1e3:.3f} ms, ratio {ours / theirs:.3f}x")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        for line in lines:
            reporter.write_line(line) if reporter else print(line)


@pytest.mark.parametrize(("label", "text"), [("clean 1 MB", CLEAN), ("ANSI-dense 1 MB", ANSI)])
def test_neutralize_vs_python_regex(benchmark: Any, label: str, text: str) -> None:
    assert neutralize(text) == py_neutralize(text)
    interleaved(
        benchmark,
        f"neutralise {label}",
        lambda: neutralize(text),
        lambda: py_neutralize(text),
        "toolroute vs python regex",
    )


def test_conversion_under_the_cap_vs_today(benchmark: Any) -> None:
    assert content_text(SMALL) == todays_conversion(SMALL)
    interleaved(
        benchmark,
        "convert a 50 KB result",
        lambda: content_text(SMALL),
        lambda: todays_conversion(SMALL),
        "capped+neutralised vs today",
    )


def test_conversion_of_a_10_mb_result_vs_today(benchmark: Any) -> None:
    assert len(content_text(HUGE)) < 100_300 and len(todays_conversion(HUGE)) == 10_000_009
    interleaved(
        benchmark,
        "convert a 10 MB result",
        lambda: content_text(HUGE),
        lambda: todays_conversion(HUGE),
        "capped+neutralised vs today",
    )
