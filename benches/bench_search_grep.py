"""grep side by side: toolroute vs the rg binary, python-ripgrep and os.walk + re (warm cache).

Run: python -m pytest benches/bench_search_grep.py --benchmark-only
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _search_trees import Report, generated_tree, large_tree, need_rg, stdlib_tree

from toolroute import _core
from toolroute.context import BuiltInToolContext

__all__ = ["generated_tree", "large_tree", "stdlib_tree"]

PATTERN = r"class \w+Error"
REPORT = Report("grep", reference="rg (subprocess)")
ROUNDS = {"generated": 10, "stdlib": 10, "large": 3}


@pytest.fixture(scope="module", autouse=True)
def _report(pytestconfig: pytest.Config) -> Iterator[None]:
    yield
    REPORT.print(pytestconfig)


def toolroute_grep(root: Path) -> int:
    result = _core.grep(BuiltInToolContext(root).confinement, PATTERN, no_ignore=False)
    return result.match_lines


def toolroute_tool(root: Path) -> int:
    from toolroute.builtins.grep import GrepRequest, grep_handler

    out = grep_handler(GrepRequest(pattern=PATTERN), BuiltInToolContext(root))
    return out.trace["match_lines"]


def rg_subprocess(root: Path) -> int:
    argv = [need_rg(), "-n", "--no-heading", "--color=never", PATTERN, "./"]
    out = subprocess.run(argv, cwd=root, capture_output=True, check=False, stdin=subprocess.DEVNULL).stdout
    return out.count(b"\n")


def python_ripgrep(root: Path) -> int:
    import python_ripgrep as pr

    return len(pr.search([PATTERN], paths=[str(root)], line_number=True))


def os_walk_re(root: Path) -> int:
    rx = re.compile(PATTERN.encode())
    found = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith("."):
                continue
            try:
                with open(os.path.join(dirpath, name), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            found += sum(1 for _ in rx.finditer(data))
    return found


IMPLS: dict[str, Callable[[Path], int]] = {
    "toolroute _core.grep": toolroute_grep,
    "toolroute grep tool (text)": toolroute_tool,
    "rg (subprocess)": rg_subprocess,
    "python-ripgrep": python_ripgrep,
    "os.walk + re": os_walk_re,
}


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("tree", ["generated", "stdlib", "large"])
def test_grep(benchmark, request: pytest.FixtureRequest, tree: str, impl: str) -> None:  # type: ignore[no-untyped-def]
    root: Path = request.getfixturevalue(f"{tree}_tree")
    fn = IMPLS[impl]
    found = REPORT.run(benchmark, tree, impl, lambda: fn(root), ROUNDS[tree])
    assert found >= 0
