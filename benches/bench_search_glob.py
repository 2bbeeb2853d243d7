"""glob, interleaved: toolroute vs rg --files, glob.glob, os.walk + fnmatch and wcmatch.

Every side counts the files it lists and must count the same (benches/_interleave.py checks it).
Run: python -m pytest benches/bench_search_glob.py -s
"""

from __future__ import annotations

import fnmatch
import glob
import os
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from _interleave import compare
from _search_trees import generated_tree, large_tree, need_rg, stdlib_tree

from toolroute import _core
from toolroute.builtins.glob import GlobRequest
from toolroute.context import BuiltInToolContext

__all__ = ["generated_tree", "large_tree", "stdlib_tree"]

PATTERN = "*.py"  # gitignore-style: any depth; the same as **/*.py
ROUNDS = {"generated": 15, "stdlib": 15, "large": 7}


def toolroute_glob(root: Path) -> int:
    return len(_core.glob(BuiltInToolContext(root).confinement, GlobRequest(pattern=PATTERN, sort="path")))


def rg_files(root: Path) -> int:
    argv = [need_rg(), "--files", "--glob", PATTERN, "./"]
    out = subprocess.run(argv, cwd=root, capture_output=True, check=False, stdin=subprocess.DEVNULL).stdout
    return out.count(b"\n")


def glob_glob(root: Path) -> int:
    return len(glob.glob(os.path.join(glob.escape(str(root)), "**", PATTERN), recursive=True))


def os_walk_fnmatch(root: Path) -> int:
    """Hidden folders and files skipped, as toolroute and rg do by default; no ignore files."""
    found = 0
    for _dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        found += len(fnmatch.filter([f for f in filenames if not f.startswith(".")], PATTERN))
    return found


def wcmatch_glob(root: Path) -> int:
    wglob = pytest.importorskip("wcmatch.glob", reason="optional peer wcmatch is not installed")
    return len(wglob.glob("**/" + PATTERN, root_dir=str(root), flags=wglob.GLOBSTAR))


ALTERNATIVES: dict[str, Callable[[Path], int]] = {
    "rg --files (subprocess)": rg_files,
    "glob.glob recursive": glob_glob,
    "os.walk + fnmatch": os_walk_fnmatch,
    "wcmatch": wcmatch_glob,
}
# Only sides that list the same files there: the Python globs know no .gitignore, which the
# generated tree is full of. (pathlib's rglob also enters hidden folders, so it is never like for like.)
LIKE_FOR_LIKE = {"generated": ["rg --files (subprocess)"], "stdlib": list(ALTERNATIVES), "large": list(ALTERNATIVES)}


@pytest.mark.parametrize("tree", ["generated", "stdlib", "large"])
def test_glob(request: pytest.FixtureRequest, tree: str) -> None:
    root: Path = request.getfixturevalue(f"{tree}_tree")
    if "wcmatch" in LIKE_FOR_LIKE[tree]:
        pytest.importorskip("wcmatch", reason="optional peer wcmatch is not installed")
    alternatives = {name: partial(ALTERNATIVES[name], root) for name in LIKE_FOR_LIKE[tree]}
    results = compare(f"glob {tree}", ("toolroute", partial(toolroute_glob, root)), alternatives, ROUNDS[tree])
    assert results and toolroute_glob(root) > 0
