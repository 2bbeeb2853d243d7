"""apply_patch: a 200-hunk patch on a 50,000-line file, toolroute vs the same matching in Python.

Run: python -m pytest benches/bench_files_patch.py -s   (interleaved: benches/_interleave.py)
Targets: at least 10x faster than pure Python, and the 200-hunk patch under 20 ms.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from _files_pure import apply_update, apply_update_file
from _interleave import Case, compare

from toolroute._core import apply_update_to_text
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

LINES = 50_000
HUNKS = 200


def _source() -> list[str]:
    return [f"    value_{i} = compute({i}, factor={i % 7})  # step {i}" for i in range(LINES)]


def _patch(lines: list[str]) -> str:
    body = ["*** Begin Patch", "*** Update File: big.py"]
    step = LINES // HUNKS
    for h in range(HUNKS):
        at = h * step + step // 2
        # Trailing-whitespace drift on the removed line of every 20th hunk exercises the fuzzy tier
        # (after an exact search that fails over the rest of the file, as in Codex).
        removed = lines[at] + ("  " if h % 20 == 0 else "")
        body += ["@@", *(" " + c for c in lines[at - 3 : at]), "-" + removed, f"+    value_{at} = 0"]
        body += [" " + c for c in lines[at + 1 : at + 4]]
    body.append("*** End Patch")
    return "\n".join(body) + "\n"


@pytest.fixture(scope="module")
def case() -> tuple[str, str]:
    lines = _source()
    content = "\n".join(lines) + "\n"
    return content, _patch(lines)


def test_same_result(case: tuple[str, str]) -> None:
    content, patch = case
    assert apply_update_to_text(patch, content) == apply_update(content, patch)


def test_in_memory(case: tuple[str, str]) -> None:
    content, patch = case
    compare(
        "apply_patch in memory: 200 hunks, 50k lines",
        ("toolroute", partial(apply_update_to_text, patch, content)),
        {"pure Python": partial(apply_update, content, patch)},
        20,
    )


def test_on_disk(case: tuple[str, str], tmp_path: Path) -> None:
    """The whole tool call (all-or-nothing, atomic write, fsync) against the same steps in Python."""
    content, patch = case
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    router = ToolRouter(context=BuiltInToolContext(ours))

    def restore(path: Path) -> Callable[[], None]:
        return lambda: path.write_text(content)

    toolroute = Case(partial(router.invoke, "apply_patch", {"patch": patch}), setup=restore(ours / "big.py"))
    python = Case(partial(apply_update_file, theirs / "big.py", patch), setup=restore(theirs / "big.py"))
    toolroute.call(), python.call()
    assert (ours / "big.py").read_text() == (theirs / "big.py").read_text() == apply_update(content, patch)
    compare("apply_patch on disk (atomic write): 200 hunks, 50k lines", ("toolroute", toolroute),
            {"pure Python": python}, 20, same=lambda a, b: True)  # fmt: skip


def _fuzzy_case(hunks: int) -> tuple[str, str]:
    """Every hunk matches only with trailing whitespace ignored: before the index, each hunk's
    exact pass scanned to the end of the file (12,500 hunks 0.11 s, 100,000 6.7 s)."""
    content = "".join(f"line {i}   \n" for i in range(2 * hunks))
    body = "".join(f"@@\n-line {2 * i}\n+LINE {2 * i}\n" for i in range(hunks))
    return content, f"*** Begin Patch\n*** Update File: f.txt\n{body}*** End Patch\n"


def test_fuzzy_hunks_against_pure_python() -> None:
    content, patch = _fuzzy_case(1_500)
    compare(
        "apply_patch in memory: 1,500 hunks matching only ignoring trailing whitespace",
        ("toolroute", partial(apply_update_to_text, patch, content)),
        {"pure Python": partial(apply_update, content, patch)},
        5,
    )


def test_fuzzy_hunks_scale_linearly() -> None:
    """Time per hunk at 12,500, 50,000 and 100,000 fuzzy hunks: flat when linear."""
    import time

    per_hunk = {}
    for hunks in (12_500, 50_000, 100_000):
        content, patch = _fuzzy_case(hunks)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            out = apply_update_to_text(patch, content)
            best = min(best, time.perf_counter() - start)
        assert out.count("LINE ") == hunks
        per_hunk[hunks] = best / hunks
        print(f"  fuzzy hunks {hunks:>7,}: {best:.3f} s, {per_hunk[hunks] * 1e6:.2f} us a hunk")
    print(f"  growth of the time per hunk, 12,500 -> 100,000 hunks: {per_hunk[100_000] / per_hunk[12_500]:.2f}x")
