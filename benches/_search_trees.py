"""Trees for the grep/glob benchmarks (warm cache, built once a session)."""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

import pytest
from _search_helpers import RG, parity_tree  # testing/, on the path (pyproject's pytest `pythonpath`)

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


# Twenty words: in a tree made only of them, most files match most queries, so the index
# cannot prune and every answer is the cost of scanning the candidates (issue 25).
DENSE_WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
]


def dense_tree_at(root: Path, files: int = 20_000, seed: int = 25) -> Path:
    """`files` files of 40 lines each, every line 6 words drawn from DENSE_WORDS, in 100 folders."""
    import random

    rng = random.Random(seed)
    for i in range(files):
        folder = root / f"d{i % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = (" ".join(rng.choices(DENSE_WORDS, k=6)) for _ in range(40))
        (folder / f"f{i}.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="session")
def dense_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dense_tree_at(tmp_path_factory.mktemp("dense"))
