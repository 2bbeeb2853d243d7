"""Single queries without an index, INTERLEAVED with the alternative a user would pick (issue 16):
each round runs toolroute, then `rg` as a subprocess (or `os.walk` + `re`/`fnmatch`), on the same
tree with the same results (checked every round); the report is the ratio of medians
(toolroute / other, below 1 = toolroute faster).

Run: python -m pytest benches/bench_search_single.py -s   (or python benches/bench_search_single.py)
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolroute import _core
from toolroute.builtins.glob import GlobRequest
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext

STDLIB = Path(os.__file__).parent
RG = shutil.which("rg")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))


def confinement(root: Path) -> _core.Confinement:
    return BuiltInToolContext(root).confinement


def stdlib_copy(dest: Path) -> Path:
    shutil.copytree(STDLIB, dest, ignore=shutil.ignore_patterns("site-packages", "__pycache__"), symlinks=True)
    return dest


def small_tree(dest: Path, files: int = 100) -> Path:
    for i in range(files):
        d = dest / f"pkg{i % 7}" / f"sub{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        ext = ".py" if i % 3 else ".txt"
        (d / f"m{i}{ext}").write_text(f"import os\nclass Thing{i}Error(Exception):\n    pass\n" * 5)
    return dest


def rg(root: Path, *args: str) -> bytes:
    argv = [RG or "rg", "--color=never", "--no-messages", *args, "./"]
    return subprocess.run(argv, cwd=root, capture_output=True, check=False, stdin=subprocess.DEVNULL).stdout


def grep_lines(root: Path, pattern: str) -> int:
    return _core.grep(
        BuiltInToolContext(root).confinement, GrepRequest(pattern=pattern), max_line_bytes=8192
    ).match_lines


def rg_lines(root: Path, pattern: str) -> int:
    # rg adds a "binary file matches" notice line where it stops in a file with a late NUL byte.
    out = rg(root, "-n", "--no-heading", "-e", pattern).splitlines()
    return sum(1 for line in out if b"stopped searching binary file" not in line)


def grep_count(root: Path, pattern: str) -> int:
    return _core.grep(
        BuiltInToolContext(root).confinement, GrepRequest(pattern=pattern, output_mode="count"), max_line_bytes=8192
    ).match_lines


def rg_count(root: Path, pattern: str) -> int:
    return sum(int(line.rsplit(b":", 1)[1]) for line in rg(root, "-c", "-e", pattern).splitlines())


def walk_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        out += [os.path.join(dirpath, n) for n in filenames if not n.startswith(".")]
    return out


def walk_re_lines(root: Path, pattern: str) -> int:
    rx = re.compile(pattern.encode(), re.MULTILINE)
    found = 0
    for path in walk_files(root):
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" not in data:
            found += len({data.count(b"\n", 0, m.start()) for m in rx.finditer(data)})
    return found


def glob_paths(root: Path) -> set[str]:
    return set(_core.glob(BuiltInToolContext(root).confinement, GlobRequest(pattern="*.py", sort="path")).paths())


def walk_pathspec(root: Path) -> set[str]:
    """os.walk + pathspec applying the root's .gitignore (as a small repository needs)."""
    import pathspec

    ignore = pathspec.GitIgnoreSpec.from_lines((root / ".gitignore").read_text().splitlines())
    want = pathspec.GitIgnoreSpec.from_lines(["*.py"])
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not ignore.match_file(f"{rel_dir}{d}/")]
        for name in filenames:
            rel = rel_dir + name
            if not name.startswith(".") and not ignore.match_file(rel) and want.match_file(rel):
                out.add(rel)
    return out


def walk_fnmatch(root: Path) -> set[str]:
    return {os.path.relpath(p, root) for p in walk_files(root) if fnmatch.fnmatch(os.path.basename(p), "*.py")}


def interleave(a: Callable[[], object], b: Callable[[], object], rounds: int = ROUNDS) -> tuple[float, float]:
    """Median seconds of a and b, alternating (which goes first alternates too); results must agree."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(rounds):
        order = [(a, ta), (b, tb)] if i % 2 == 0 else [(b, tb), (a, ta)]
        results = []
        for fn, times in order:
            start = time.perf_counter()
            results.append(fn())
            times.append(time.perf_counter() - start)
        assert results[0] == results[1], f"results differ: {results}"
    return statistics.median(ta), statistics.median(tb)


def cases(base: Path) -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    stdlib = stdlib_copy(base / "stdlib")
    small = small_tree(base / "small")
    one = base / "one"
    one.mkdir()
    (one / "m.py").write_text("class FooError(Exception):\n    pass\n")
    out = []
    for name, pattern in (("literal+regex", r"class \w+Error"), ("dense, no literal", r"[A-Z]\w*")):
        out.append(
            (
                f"grep {name} content, stdlib vs rg",
                lambda p=pattern: grep_lines(stdlib, p),
                lambda p=pattern: rg_lines(stdlib, p),
            )
        )
        out.append(
            (
                f"grep {name} count, stdlib vs rg -c",
                lambda p=pattern: grep_count(stdlib, p),
                lambda p=pattern: rg_count(stdlib, p),
            )
        )
        out.append(
            (
                f"grep {name}, 1-file tree vs rg",
                lambda p=pattern: grep_lines(one, p),
                lambda p=pattern: rg_lines(one, p),
            )
        )
    out.append(
        (
            "grep class \\w+Error, 100 files vs os.walk+re",
            lambda: grep_lines(small, r"class \w+Error"),
            lambda: walk_re_lines(small, r"class \w+Error"),
        )
    )
    out.append(("glob *.py, 100 files vs os.walk+fnmatch", lambda: glob_paths(small), lambda: walk_fnmatch(small)))
    repo = small_tree(base / "repo")
    (repo / ".git").mkdir()
    (repo / ".gitignore").write_text("pkg6/\n*.txt\n")
    out.append(
        ("glob *.py, 100-file git repo vs os.walk+pathspec", lambda: glob_paths(repo), lambda: walk_pathspec(repo))
    )
    out.append(("glob *.py, stdlib vs os.walk+fnmatch", lambda: glob_paths(stdlib), lambda: walk_fnmatch(stdlib)))
    return out


def report() -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for title, ours, theirs in cases(Path(tmp)):
            if RG is None and "rg" in title:
                continue
            a, b = interleave(ours, theirs)
            lines.append(f"{title:52} toolroute {a * 1e3:8.2f} ms  other {b * 1e3:8.2f} ms  ratio {a / b:5.2f}x")
    return lines


def test_single_queries_interleaved() -> None:
    for line in report():
        print(line)


if __name__ == "__main__":
    for line in report():
        print(line)
    sys.exit(0)
