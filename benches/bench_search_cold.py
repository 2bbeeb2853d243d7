"""Cold start (issue 25): the first grep of a new process on a workspace indexed before, answered
by the index daemon (`TOOLROUTE_SEARCH_INDEX_DAEMON=1`: the warm index lives in a long-lived
process) and with the index read back from the on-disk cache and checked against the tree,
INTERLEAVED with a query answered by a warm index in a long-running process, with the first query of a new process
without the cache (a scan, as before) and with spawning `rg`. Every answer is checked against
the unindexed one (rows and skip counts; rg by its counts). The times of the new processes are
the query's own (from the call to the answer, measured inside the child: the interpreter's start
and imports are the same with or without an index); rg's are its whole run.

Run: python -m pytest benches/bench_search_cold.py -s   (BENCH_ROUNDS=7 by default)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _interleave import Case, Measured, Result, compare
from _search_trees import large_tree, need_rg, stdlib_tree
from bench_search_index import SESSION, conf, rg_query

from toolroute import _core
from toolroute.builtins.grep import GrepRequest

__all__ = ["large_tree", "stdlib_tree"]

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
CHILD = Path(__file__).with_name("_cold_child.py")
# First queries an agent asks of a workspace: selective literals, a regex, a mode with counts.
QUERIES = [SESSION[i] for i in (6, 1, 8, 0, 12, 16)]


def answer(r: Any) -> list[Any]:
    return [r.files_matched, r.match_lines, [repr(row) for row in r.rows()], repr(sorted(r.stats.items()))]


def counts(opts: dict[str, Any], a: list[Any]) -> tuple[int, int]:
    return a[0], -1 if opts.get("output_mode") == "files_with_matches" else a[1]


DAEMON = {"TOOLROUTE_SEARCH_INDEX_DAEMON": "1"}
ALONE = {"TOOLROUTE_SEARCH_INDEX_DAEMON": "0"}  # the sides without one (by default one would answer)
DEFAULT = {"TOOLROUTE_SEARCH_INDEX_DAEMON": "auto"}  # what an unset variable means


def in_child(
    root: Path, pattern: str, opts: dict[str, Any], cache: str, env: dict[str, str] | None = None, *mode: str
) -> dict[str, Any]:
    env = {**os.environ, "TOOLROUTE_SEARCH_INDEX_CACHE": cache, **(env or {})}
    out = subprocess.run(
        [sys.executable, str(CHILD), str(root), pattern, json.dumps(opts), *mode],
        env=env,
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def saved(cache: Path) -> list[Path]:
    """Cache files under their own names (a save in progress is a hidden temporary file)."""
    return [f for f in cache.glob("*.idx") if not f.name.startswith(".")]


def rotating(run: Callable[[int], Any]) -> Callable[[], Any]:
    """A side that asks the next query each call (every side is called equally often)."""
    calls = [0]

    def side() -> Any:
        i = calls[0] % len(QUERIES)
        calls[0] += 1
        return run(i)

    return side


def cold_bench(name: str, root: Path, cache: Path) -> list[Result]:
    os.environ["TOOLROUTE_SEARCH_INDEX_CACHE"] = str(cache)
    c = conf(root)
    expected = [
        answer(_core.grep(c, GrepRequest(pattern=p, **o), max_line_bytes=8192, index=False)) for p, o in QUERIES
    ]
    began = time.perf_counter()
    assert _core.search_index_warm(c, timeout=600), _core.search_index_stats(c)
    print(f"\n{name}: {_core.search_index_stats(c)['files']} files, built in {time.perf_counter() - began:.2f} s")
    deadline = time.monotonic() + 60
    while not saved(cache):  # written by the index's thread after the build
        assert time.monotonic() < deadline, "the index was not written to the cache"
        time.sleep(0.05)
    print(f"  cache file: {sum(f.stat().st_size for f in saved(cache)) / 1e6:.1f} MB")

    def daemon(i: int) -> Measured:
        pattern, opts = QUERIES[i]
        got = in_child(root, pattern, opts, str(cache), DAEMON)
        assert got["daemon"] == 1, got  # answered by the daemon
        assert got["answer"] == expected[i], f"the daemon changed the answer to {pattern!r}"
        return Measured(got["seconds"], counts(opts, got["answer"]))

    def default(i: int) -> Measured:
        pattern, opts = QUERIES[i]
        got = in_child(root, pattern, opts, str(cache), DEFAULT)
        assert got["daemon"] == 1, got  # by default too: the daemon an earlier process started
        assert got["answer"] == expected[i], f"the daemon changed the answer to {pattern!r}"
        return Measured(got["seconds"], counts(opts, got["answer"]))

    def cached(i: int) -> Measured:
        pattern, opts = QUERIES[i]
        got = in_child(root, pattern, opts, str(cache), ALONE)
        assert got["restored"] and got["served"] == 1, got  # answered by the restored index
        assert got["answer"] == expected[i], f"the restored index changed the answer to {pattern!r}"
        return Measured(got["seconds"], counts(opts, got["answer"]))

    def scan(i: int) -> Measured:
        pattern, opts = QUERIES[i]
        got = in_child(root, pattern, opts, "0", ALONE)
        assert not got["restored"] and got["served"] == 0 and got["answer"] == expected[i], got
        return Measured(got["seconds"], counts(opts, got["answer"]))

    def warm(i: int) -> Measured:
        pattern, opts = QUERIES[i]
        start = time.perf_counter()
        r = _core.grep(c, GrepRequest(pattern=pattern, **opts), max_line_bytes=8192)
        seconds = time.perf_counter() - start
        assert answer(r) == expected[i]
        return Measured(seconds, counts(opts, answer(r)))

    def rg(i: int) -> tuple[int, int]:
        return rg_query(root, *QUERIES[i])

    need_rg()
    start_daemon(root, cache)
    served = _core.search_index_stats(c)["served"]
    results = compare(
        f"first query of a new process, {name}",
        ("toolroute, index daemon", Case(rotating(daemon))),
        {
            "toolroute warm index (long-running process)": Case(rotating(warm)),
            "toolroute, default settings (a daemon running)": Case(rotating(default)),
            "toolroute, index from the cache": Case(rotating(cached)),
            "toolroute, no cache (scan)": Case(rotating(scan)),
            "rg per query": Case(rotating(rg)),
        },
        rounds=ROUNDS * len(QUERIES),
    )
    assert _core.search_index_stats(c)["served"] > served
    stop = "from toolroute import _core; assert _core.search_daemon_stop()"
    subprocess.run([sys.executable, "-c", stop], env={**os.environ, **DAEMON}, check=True, timeout=60)
    return results


def start_daemon(root: Path, cache: Path) -> None:
    """The first process with the daemon setting starts it (and scans); then it is made ready."""
    pattern, opts = QUERIES[0]
    assert in_child(root, pattern, opts, str(cache), DAEMON)["daemon"] == 0
    deadline = time.monotonic() + 60
    while not list(cache.glob("daemon-*.sock")):
        assert time.monotonic() < deadline, "no daemon started"
        time.sleep(0.05)
    assert in_child(root, pattern, opts, str(cache), DAEMON, "warm")["ready"]


@pytest.mark.parametrize("tree", ["stdlib_tree", "large_tree"])
def test_cold_start(tree: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    cold_bench(tree.replace("_", " "), request.getfixturevalue(tree), tmp_path / "cache")
