"""glob side by side: toolroute vs rg --files, glob.glob, Path.rglob, os.walk + fnmatch, wcmatch.

Run: python -m pytest benches/bench_search_glob.py --benchmark-only
"""

from __future__ import annotations

import fnmatch
import glob
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _search_trees import Report, generated_tree, large_tree, need_rg, stdlib_tree

from toolroute import _core
from toolroute.context import BuiltInToolContext

__all__ = ["generated_tree", "large_tree", "stdlib_tree"]

PATTERN = "*.py"  # gitignore-style: any depth; the same as **/*.py
REPORT = Report("glob", reference="rg --files (subprocess)")
ROUNDS = {"generated": 15, "stdlib": 15, "large": 7}


@pytest.fixture(scope="module", autouse=True)
def _report(pytestconfig: pytest.Config) -> Iterator[None]:
    yield
    REPORT.print(pytestconfig)


def toolroute_glob(root: Path, sort: str = "path") -> int:
    return len(_core.glob(BuiltInToolContext(root).confinement, PATTERN, sort=sort))


def rg_files(root: Path) -> int:
    argv = [need_rg(), "--files", "--glob", PATTERN, "./"]
    out = subprocess.run(argv, cwd=root, capture_output=True, check=False, stdin=subprocess.DEVNULL).stdout
    return out.count(b"\n")


def glob_glob(root: Path) -> int:
    return len(glob.glob(os.path.join(glob.escape(str(root)), "**", PATTERN), recursive=True))


def path_rglob(root: Path) -> int:
    return sum(1 for _ in root.rglob(PATTERN))


def os_walk_fnmatch(root: Path) -> int:
    found = 0
    for _dirpath, _dirnames, filenames in os.walk(root):
        found += len(fnmatch.filter(filenames, PATTERN))
    return found


def wcmatch_glob(root: Path) -> int:
    from wcmatch import glob as wglob

    return len(wglob.glob("**/" + PATTERN, root_dir=str(root), flags=wglob.GLOBSTAR))


IMPLS: dict[str, Callable[[Path], int]] = {
    "toolroute _core.glob (path)": toolroute_glob,
    "toolroute _core.glob (mtime)": lambda root: toolroute_glob(root, "modified"),
    "rg --files (subprocess)": rg_files,
    "glob.glob recursive": glob_glob,
    "pathlib rglob": path_rglob,
    "os.walk + fnmatch": os_walk_fnmatch,
    "wcmatch": wcmatch_glob,
}


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("tree", ["generated", "stdlib", "large"])
def test_glob(benchmark, request: pytest.FixtureRequest, tree: str, impl: str) -> None:  # type: ignore[no-untyped-def]
    root: Path = request.getfixturevalue(f"{tree}_tree")
    fn = IMPLS[impl]
    found = REPORT.run(benchmark, tree, impl, lambda: fn(root), ROUNDS[tree])
    assert found > 0
