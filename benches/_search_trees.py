"""Trees and the side-by-side report for the grep/glob benchmarks (warm cache, built once a session)."""

from __future__ import annotations

import resource
import shutil
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _search_helpers import RG, parity_tree

# The Python running the benchmarks: its standard library, and its whole installation.
PYTHON_INSTALL = Path(sys.base_prefix)
STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="session")
def generated_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return parity_tree(tmp_path_factory.mktemp("gen"), files=5000)


@pytest.fixture(scope="session")
def stdlib_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPython standard library without site-packages (about 2,500 files), copied once."""
    if not STDLIB.is_dir():
        pytest.skip(f"{STDLIB} not found")
    dest = tmp_path_factory.mktemp("stdlib") / STDLIB.name
    shutil.copytree(STDLIB, dest, ignore=shutil.ignore_patterns("site-packages", "__pycache__"), symlinks=True)
    return dest


@pytest.fixture(scope="session")
def large_tree() -> Path:
    """A whole Python install with site-packages (about 50,000 files), used in place."""
    if not PYTHON_INSTALL.is_dir():
        pytest.skip(f"{PYTHON_INSTALL} not found")
    return PYTHON_INSTALL


def need_rg() -> str:
    if RG is None:
        pytest.skip("needs the rg binary (Debian package ripgrep)")
    return RG


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Report:
    """Collect medians per (tree, implementation) and print ratios once the module is done."""

    def __init__(self, title: str, reference: str) -> None:
        self.title = title
        self.reference = reference
        self.medians: dict[str, dict[str, float]] = {}
        self.cpu: dict[tuple[str, str], float] = {}
        self.sizes: dict[tuple[str, str], int] = {}

    def run(self, benchmark: Any, tree: str, impl: str, fn: Callable[[], int], rounds: int) -> int:
        benchmark.group = f"{self.title} {tree}"
        cpu: list[float] = []

        def timed() -> int:
            # CPU seconds of this process (all threads) and of finished children (rg): on a shared,
            # loaded machine this is steadier than wall time, which is what the tables show.
            start = time.process_time() + _children_cpu()
            found = fn()
            cpu.append(time.process_time() + _children_cpu() - start)
            return found

        size = benchmark.pedantic(timed, rounds=rounds, warmup_rounds=1, iterations=1)
        self.medians.setdefault(tree, {})[impl] = benchmark.stats.stats.median
        self.cpu[(tree, impl)] = statistics.median(cpu[1:] or cpu)
        self.sizes[(tree, impl)] = size
        return size

    def lines(self) -> Iterator[str]:
        yield f"\n==== {self.title}: medians and ratios to {self.reference} (<1 = faster) ===="
        for tree, row in self.medians.items():
            ref = row.get(self.reference)
            ref_cpu = self.cpu.get((tree, self.reference))
            yield f"-- {tree}: wall ms, ratio | CPU ms, ratio"
            for impl, median in sorted(row.items(), key=lambda kv: kv[1]):
                ratio = f"{median / ref:5.2f}x" if ref else "  n/a"
                cpu = self.cpu[(tree, impl)]
                cpu_ratio = f"{cpu / ref_cpu:5.2f}x" if ref_cpu else "  n/a"
                size = self.sizes.get((tree, impl))
                yield (f"   {impl:<30} {median * 1000:8.1f} {ratio} | {cpu * 1000:8.1f} {cpu_ratio}  ({size} results)")

    def print(self, config: pytest.Config) -> None:
        """Past the capture: plain prints from a fixture's teardown would be swallowed."""
        capman = config.pluginmanager.getplugin("capturemanager")
        text = "\n".join(self.lines())
        if capman is None:
            print(text)
            return
        with capman.global_and_fixture_disabled():
            print(text, flush=True)
