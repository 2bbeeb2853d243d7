"""apply_patch: a 200-hunk patch on a 50,000-line file, toolroute vs the same matching in Python.

Run: python -m pytest benches/bench_files_patch.py --benchmark-only
Targets: at least 10x faster than pure Python, and the 200-hunk patch under 20 ms.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _files_pure import apply_update, apply_update_file
from _files_report import ratio_report, record  # noqa: F401  (fixture)

from toolroute._core import apply_update_to_text
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

LINES = 50_000
HUNKS = 200
pytestmark = pytest.mark.usefixtures("ratio_report")


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


def test_in_memory_toolroute(benchmark, case: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    content, patch = case
    benchmark.group = "apply_patch in memory: 200 hunks, 50k lines"
    benchmark(apply_update_to_text, patch, content)
    record(benchmark, "apply_patch in memory:toolroute")


def test_in_memory_pure_python(benchmark, case: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    content, patch = case
    benchmark.group = "apply_patch in memory: 200 hunks, 50k lines"
    benchmark(apply_update, content, patch)
    record(benchmark, "apply_patch in memory:pure-python")


def _restore(path: Path, content: str):  # type: ignore[no-untyped-def]
    def setup() -> None:
        path.write_text(content)

    return setup


def test_end_to_end_toolroute(benchmark, case: tuple[str, str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    content, patch = case
    path = tmp_path / "big.py"
    router = ToolRouter(context=BuiltInToolContext(tmp_path))
    benchmark.group = "apply_patch on disk (atomic write): 200 hunks, 50k lines"
    benchmark.pedantic(router.invoke, args=("apply_patch", {"patch": patch}), setup=_restore(path, content), rounds=30)
    record(benchmark, "apply_patch on disk:toolroute")
    assert path.read_text() == apply_update(content, patch)


def test_end_to_end_pure_python(benchmark, case: tuple[str, str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    content, patch = case
    path = tmp_path / "big.py"
    benchmark.group = "apply_patch on disk (atomic write): 200 hunks, 50k lines"
    benchmark.pedantic(apply_update_file, args=(path, patch), setup=_restore(path, content), rounds=30)
    record(benchmark, "apply_patch on disk:pure-python")
