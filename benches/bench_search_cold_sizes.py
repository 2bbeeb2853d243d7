"""Cold start by tree size (issue 48): the first grep of a new process on trees of 2,000, 20,000
and 100,000 files, with every side of benches/bench_search_cold.py (the index daemon, a warm index
in a long-running process, the index read back from the cache, a scan, rg), interleaved, each
answer checked against the unindexed one; then the cost growth per tenfold-ish step of each side.

The trees are copies of the standard library's files under 8 KiB (real files, no hard links: the
index treats a linked file once), cycled into `c000/`, `c001/`, ... until the size is reached.

Run: python -m pytest benches/bench_search_cold_sizes.py -s   (BENCH_ROUNDS=7 by default)
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _interleave import Result
from _search_trees import STDLIB
from bench_search_cold import cold_bench

SIZES = (2_000, 20_000, 100_000)
SMALL = 8 * 1024
MEDIANS: dict[int, dict[str, float]] = {}


def small_files() -> list[Path]:
    """The standard library's small files, in a fixed order."""
    skip = {"site-packages", "__pycache__"}
    found = [p for p in STDLIB.rglob("*") if p.is_file() and not p.is_symlink() and not skip & set(p.parts)]
    return sorted((p for p in found if p.stat().st_size <= SMALL), key=lambda p: str(p))


def sized_tree(root: Path, files: int) -> Path:
    pool = small_files()
    for i in range(files):
        source = pool[i % len(pool)]
        dest = root / f"c{i // len(pool):03d}" / source.relative_to(STDLIB)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
    return root


@pytest.fixture(scope="module", autouse=True)
def growth() -> Iterator[None]:
    yield
    if len(MEDIANS) < 2:
        return
    print("\ncost growth of the first query of a new process, per step (median time ratio):")
    sizes = sorted(MEDIANS)
    for side in MEDIANS[sizes[0]]:
        steps = [
            f"{a:,} -> {b:,}: {MEDIANS[b][side] / MEDIANS[a][side]:.2f}x"
            for a, b in itertools.pairwise(sizes)
            if side in MEDIANS[b]
        ]
        print(f"  {side}: {'; '.join(steps)}")
    print("first query through the daemon / warm query, per size:")
    for size in sizes:
        ratio = MEDIANS[size]["toolroute, index daemon"] / MEDIANS[size]["toolroute warm index (long-running process)"]
        print(f"  {size:,} files: {ratio:.2f}x")


@pytest.mark.parametrize("files", SIZES)
def test_cold_start_by_size(files: int, tmp_path: Path) -> None:
    if not STDLIB.is_dir():
        pytest.skip(f"{STDLIB} not found")
    root = sized_tree(tmp_path / "tree", files)
    results: list[Result] = cold_bench(f"{files:,} files", root, tmp_path / "cache")
    medians = {"toolroute, index daemon": results[0].toolroute_median_s}
    medians |= {r.alternative: r.alternative_median_s for r in results}
    MEDIANS[files] = medians
