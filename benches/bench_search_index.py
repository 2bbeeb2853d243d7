"""A 30-query agent session with the warm grep index (issue 16), INTERLEAVED with spawning `rg` per
query and with toolroute's unindexed grep, on the large tree (a whole Python install, ~47k files)
and on a copy of the CPython standard library. Every side must give the same per-query counts
(benches/_interleave.py checks it before timing) and, every round, the indexed session's full
results (rows and skip counts) must equal the unindexed session's. Also: index build time vs two
full `rg` scans, and the index's memory per indexed GB.

Also the dense tree (issue 25): 20,000 files written with a 20-word vocabulary, so most files
match most queries, the index cannot prune and the session measures the candidate scan itself.

Run: python -m pytest benches/bench_search_index.py -s   (BENCH_ROUNDS=3 by default)
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from _interleave import Case, compare
from _search_trees import DENSE_WORDS, dense_tree, large_tree, need_rg, stdlib_tree

from toolroute import _core
from toolroute.builtins.grep import GrepRequest, grep_handler
from toolroute.context import BuiltInToolContext

__all__ = ["dense_tree", "large_tree", "stdlib_tree"]

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))

# What an agent exploring a Python code base asks, in the modes it asks for them.
SESSION: list[tuple[str, dict[str, Any]]] = [
    (r"class \w+Error", {}),
    ("import asyncio", {"output_mode": "files_with_matches"}),
    ("TODO", {"output_mode": "count"}),
    ("def __init__", {"glob": ["*.py"], "output_mode": "count"}),
    ("raise ValueError", {"file_type": ["py"], "output_mode": "count"}),
    ("deprecated", {"case_insensitive": True, "output_mode": "files_with_matches"}),
    ("HTTPConnection", {}),
    (r"socket\.create_connection", {}),
    (r"os\.environ\.get", {"output_mode": "count"}),
    ("PyObject_GetAttr", {"file_type": ["c"], "output_mode": "count"}),
    ("lru_cache", {"output_mode": "files_with_matches"}),
    (r"async def \w+", {"glob": ["*.py"], "output_mode": "count"}),
    (r"json\.loads", {}),
    (r"subprocess\.run\(", {"output_mode": "count"}),
    ("copyright", {"case_insensitive": True, "output_mode": "count"}),
    ("assertRaisesRegex", {"output_mode": "files_with_matches"}),
    ("__version__ = ", {}),
    (r"logging\.getLogger\(__name__\)", {"output_mode": "count"}),
    (r"class \w*Mixin\b", {"glob": ["*.py"]}),
    (r"sys\.platform == .win32.", {"output_mode": "count"}),
    (r"def (get|set)_\w+", {"output_mode": "count"}),
    ("NotImplementedError", {"output_mode": "files_with_matches", "glob": ["!**/test*/**"]}),
    ("dataclass", {"glob": ["*.py"], "output_mode": "count"}),  # rg 13 has no .pyi in its py type
    ("yield from", {}),
    (r"threading\.Lock\(\)", {}),
    (r"typing\.Optional", {"output_mode": "count"}),
    ("utf-?8", {"case_insensitive": True, "output_mode": "files_with_matches"}),
    (r"re\.compile\(r", {"output_mode": "count"}),
    ("contextmanager", {"output_mode": "files_with_matches"}),
    (r"weakref\.ref\(", {}),
]
assert len(SESSION) == 30


def conf(root: Path) -> Any:
    return BuiltInToolContext(root).confinement


Session = list[tuple[str, dict[str, Any]]]


def tool_session(root: Path, index: bool, session: Session = SESSION) -> list[tuple[Any, ...]]:
    """Per query: files matched, matching lines, every row and the skip counts."""
    c = conf(root)
    out = []
    for pattern, opts in session:
        r = _core.grep(c, GrepRequest(pattern=pattern, **opts), max_line_bytes=8192, index=index)
        out.append((r.files_matched, r.match_lines, tuple(map(repr, r.rows())), repr(sorted(r.stats.items()))))
    return out


def rg_query(root: Path, pattern: str, opts: dict[str, Any]) -> tuple[int, int]:
    mode = opts.get("output_mode", "content")
    argv = [need_rg(), "--no-require-git", "--color=never", "--no-messages"]
    argv += {"content": ["-n", "--no-heading"], "count": ["-c"], "files_with_matches": ["-l"]}[mode]
    if opts.get("case_insensitive"):
        argv.append("-i")
    for g in opts.get("glob", []):
        argv += ["-g", g]
    for t in opts.get("file_type", []):
        argv += ["-t", t]
    out = subprocess.run([*argv, "-e", pattern, "./"], cwd=root, capture_output=True, stdin=subprocess.DEVNULL).stdout
    lines = [line for line in out.splitlines() if b"binary file matches" not in line]
    if mode == "count":
        return len(lines), sum(int(line.rsplit(b":", 1)[1]) for line in lines)
    if mode == "files_with_matches":
        return len(lines), -1
    return len({line.split(b":", 1)[0] for line in lines}), len(lines)


def rg_session(root: Path, session: Session = SESSION) -> list[tuple[int, int]]:
    return [rg_query(root, p, o) for p, o in session]


def counts(results: list[Any], session: Session = SESSION) -> list[tuple[int, int]]:
    """The numbers every side can give: files matched, and lines (unless files_with_matches)."""
    out = []
    for (_, opts), q in zip(session, results, strict=True):
        lines = -1 if opts.get("output_mode") == "files_with_matches" else q[1]
        out.append((q[0], lines))
    return out


def session_bench(name: str, root: Path, session: Session = SESSION) -> None:
    c = conf(root)
    began = time.perf_counter()
    assert _core.search_index_warm(c, timeout=600), _core.search_index_stats(c)
    built = time.perf_counter() - began
    stats = _core.search_index_stats(c)
    rg_started = time.perf_counter()
    subprocess.run([need_rg(), "-c", "--no-require-git", "zq9xj", "./"], cwd=root, capture_output=True)
    subprocess.run([need_rg(), "-c", "--no-require-git", "-i", "zq9xj", "./"], cwd=root, capture_output=True)
    two_scans = time.perf_counter() - rg_started
    gb = stats["bytes"] / 1e9
    print(
        f"\n{name}: index of {stats['files']} files, {stats['bytes'] / 1e6:.0f} MB read, built in {built:.2f} s "
        f"(two rg scans: {two_scans:.2f} s); memory {stats['memory'] / 1e6:.1f} MB = "
        f"{stats['memory'] / 1e6 / max(gb, 1e-9):.0f} MB per indexed GB; {stats['watched']} folders watched"
    )
    last: dict[str, Any] = {}

    def indexed() -> list[tuple[int, int]]:
        last["indexed"] = tool_session(root, True, session)
        return counts(last["indexed"], session)

    def unindexed() -> list[tuple[int, int]]:
        result = tool_session(root, False, session)
        # Every round: the indexed answers are the unindexed ones, rows and skip counts included.
        assert result == last["indexed"], "the index changed an answer"
        return counts(result, session)

    def rg() -> list[tuple[int, int]]:
        return rg_session(root, session)

    # Rounds rotate the order, so the unindexed side may run first: `last` must be filled.
    indexed()
    compare(
        f"{len(session)}-query session, {name}",
        ("toolroute indexed", Case(indexed)),
        {"rg per query": Case(rg), "toolroute unindexed": Case(unindexed)},
        rounds=ROUNDS,
    )
    assert _core.search_index_stats(c)["served"] > 0


def test_session_large_tree(large_tree: Path) -> None:
    session_bench("large tree", large_tree)


def test_session_stdlib(stdlib_tree: Path) -> None:
    session_bench("stdlib copy", stdlib_tree)


def dense_session() -> Session:
    """30 queries on the dense tree, where the index cannot prune: words, word pairs, a regex
    between two words and case-insensitive words, in each output mode in turn."""
    modes: list[dict[str, Any]] = [{}, {"output_mode": "count"}, {"output_mode": "files_with_matches"}]
    out: Session = []
    for i in range(30):
        a, b = DENSE_WORDS[i % 20], DENSE_WORDS[(i * 7 + 3) % 20]
        pattern = [a, f"{a} {b}", rf"{a} \w+ {b}", a.upper()][i % 4]
        opts = dict(modes[i % 3])
        if i % 4 == 3:
            opts["case_insensitive"] = True
        out.append((pattern, opts))
    return out


def test_session_dense_tree(dense_tree: Path) -> None:
    """Issue 25's candidate-scan target: 20,000 files where most files match most queries. Timed
    as an agent gets it: the grep tool's answer (its first page under the output cap, and the
    totals), against `rg` per query; the counts must be rg's, and before timing, every row the
    indexed search finds must equal the unindexed search's."""
    session = dense_session()
    ctx = BuiltInToolContext(dense_tree)
    assert _core.search_index_warm(ctx.confinement, timeout=600)
    assert tool_session(dense_tree, True, session) == tool_session(dense_tree, False, session)

    def tool() -> list[tuple[int, int]]:
        out = []
        for pattern, opts in session:
            trace = grep_handler(GrepRequest(pattern=pattern, **opts), ctx).trace
            lines = -1 if opts.get("output_mode") == "files_with_matches" else trace["match_lines"]
            out.append((trace["files_matched"], lines))
        return out

    compare(
        "30-query session, dense tree (20,000 files, 20 words), the grep tool's answers",
        ("toolroute indexed", Case(tool)),
        {"rg per query": Case(lambda: rg_session(dense_tree, session))},
        rounds=ROUNDS,
    )
