"""The search index kept on disk between processes (issue 25, cold start): a new process answers
from the last one's index, checked against the tree first, and never trusts a cache file it cannot
verify (another user's, truncated, damaged, for another workspace, made under other ignore rules
outside the tree, or half-written by a process killed mid-save).

Every child process here is a new process, as a CLI call or a restarted agent is; each compares
its indexed answers with unindexed ones in the same process.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_search_index import random_change, random_tree

CHILD = r"""
import json, sys, time
from pathlib import Path
from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext

root, mode = Path(sys.argv[1]), sys.argv[2]  # query | build (and wait) | warm (and wait for the save)
conf = BuiltInToolContext(root).confinement
QUERIES = [{"pattern": "needle"}, {"pattern": "needle", "output_mode": "count", "glob": ["*.py"]},
           {"pattern": "hay", "output_mode": "files_with_matches"}]

def answer(request, index):
    r = _core.grep(conf, GrepRequest(**request), max_line_bytes=1000, index=index)
    return [r.files_matched, r.match_lines, [repr(x) for x in r.rows()], sorted(r.stats.items())]

first = answer(QUERIES[0], True)
stats = _core.search_index_stats(conf)
out = {"restored": stats["restored"], "served": stats["served"], "state": stats["state"], "dirty": stats["dirty"],
       "same": [first == answer(QUERIES[0], False)]
               + [answer(q, True) == answer(q, False) for q in QUERIES[1:]]}
if mode in ("build", "warm"):
    assert _core.search_index_warm(conf, timeout=60)
    time.sleep(0.3)
if mode == "warm":
    cache = Path(sys.argv[3])
    deadline = time.monotonic() + 30
    while _core.search_index_stats(conf)["dirty"] or not [f for f in cache.glob("*.idx") if f.name[0] != "."]:
        assert time.monotonic() < deadline, "no cache file written"
        time.sleep(0.02)
    time.sleep(0.3)  # the save after the build (or after folding) has finished
print(json.dumps(out))
"""


def run_child(
    root: Path, cache: Path, *, warm: bool = False, mode: str = "", env: dict[str, str] | None = None
) -> dict[str, Any]:
    full = {**os.environ, "TOOLROUTE_SEARCH_INDEX_CACHE": str(cache), **(env or {})}
    argv = [sys.executable, "-c", CHILD, str(root), mode or ("warm" if warm else "query"), str(cache)]
    done = subprocess.run(argv, capture_output=True, text=True, env=full, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(result["same"]), result  # whatever the cache held, answers are the unindexed ones
    return result


def tree(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    for i in range(40):
        extra = "needle\n" if i % 7 == 0 else ""
        (root / "src" / f"m{i}.py").write_text(f"def f{i}():\n    return 'hay {i}'\n{extra}")
    (root / "notes.txt").write_text("needle in the notes\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "skip.log").write_text("needle ignored\n")
    return root


def cached_files(cache: Path) -> list[Path]:
    """The cache files under their own names (a save in progress is a hidden temporary file)."""
    return sorted(f for f in cache.glob("*.idx") if not f.name.startswith("."))


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_a_new_process_answers_from_the_index_the_last_one_saved(tmp_path: Path, cache: Path) -> None:
    root = tree(tmp_path / "ws")
    first = run_child(root, cache, warm=True)
    assert not first["restored"] and first["state"] == "none"  # no cache yet: the first query scans
    assert len(cached_files(cache)) == 1
    second = run_child(root, cache)
    assert second["restored"] and second["served"] == 1 and second["state"] == "ready", second
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert all((f.stat().st_mode & 0o777) == 0o600 for f in cached_files(cache))


def test_changes_made_while_no_process_ran_are_seen(tmp_path: Path, cache: Path) -> None:
    root = tree(tmp_path / "ws")
    run_child(root, cache, warm=True)
    f = root / "src" / "m1.py"
    text = f.read_text()
    f.write_text(text.replace("hay", "nee"))  # same size, new content: only the change time tells
    assert f.stat().st_size == len(text)
    (root / "src" / "new.py").write_text("needle new\n")
    (root / "src" / "m0.py").unlink()
    os.replace(root / "notes.txt", root / "src" / "moved.txt")
    (root / "src" / "deep").mkdir()
    (root / "src" / "deep" / "x.py").write_text("needle deep\n")
    got = run_child(root, cache)
    assert got["restored"] and got["served"] == 1, got


def test_a_rule_change_in_the_tree_makes_the_cached_index_unusable(tmp_path: Path, cache: Path) -> None:
    root = tree(tmp_path / "ws")
    run_child(root, cache, warm=True)
    (root / ".gitignore").write_text("*.txt\n")  # skip.log comes back, notes.txt goes
    got = run_child(root, cache)
    assert got["served"] == 0, got  # answered by a scan, not from the stale file list


@pytest.mark.parametrize("where", ["parent folder", "git global excludes"])
def test_rules_outside_the_tree_changed_between_processes(tmp_path: Path, cache: Path, where: str) -> None:
    """No stamp inside the tree covers these: the cache records them and is not used once they
    differ."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    root = tree(tmp_path / "outer" / "ws")
    run_child(root, cache, warm=True, env=env)
    assert run_child(root, cache, env=env)["restored"]
    if where == "parent folder":
        (tmp_path / "outer" / ".gitignore").write_text("*.txt\n")
    else:
        (home / ".config" / "git" / "ignore").write_text("*.txt\n")
    got = run_child(root, cache, env=env)
    assert not got["restored"], got


@pytest.mark.parametrize("seed", range(4))
def test_random_changes_between_processes(tmp_path: Path, cache: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "ws"
    root.mkdir()
    random_tree(root, rng)
    run_child(root, cache, warm=True)
    restored = 0
    for step in range(8):
        code = random_change(root, rng)
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        got = run_child(root, cache, warm=step % 2 == 1)  # odd steps save the index again
        restored += got["restored"]
    assert restored >= 2  # most changes leave the cached index usable (only rule files break it)


# ---- cache files that must not be trusted -------------------------------------------------------


def saved(tmp_path: Path, cache: Path) -> tuple[Path, Path]:
    root = tree(tmp_path / "ws")
    run_child(root, cache, warm=True)
    (file,) = cached_files(cache)
    return root, file


def rewritten_or_gone(root: Path, cache: Path, file: Path) -> bool:
    """The bad file was removed; a file under its name now is the child's own new save (its
    second query started a build), whole."""
    return not file.exists() or bool(run_child(root, cache)["restored"])


@pytest.mark.parametrize("cut", [0, 16, 100, "half", -5, -1])
def test_a_truncated_file_is_discarded(tmp_path: Path, cache: Path, cut: Any) -> None:
    root, file = saved(tmp_path, cache)
    data = file.read_bytes()
    end = len(data) // 2 if cut == "half" else cut
    file.write_bytes(data[:end])
    got = run_child(root, cache)
    assert not got["restored"], got
    assert rewritten_or_gone(root, cache, file)


def test_damaged_bytes_anywhere_are_discarded(tmp_path: Path, cache: Path) -> None:
    root, file = saved(tmp_path, cache)
    data = file.read_bytes()
    rng = random.Random(5)
    for at in [0, 20, len(data) // 3, len(data) // 2, len(data) - 5, len(data) - 1, *rng.sample(range(len(data)), 4)]:
        bad = bytearray(data)
        bad[at] ^= 0x40
        file.write_bytes(bytes(bad))
        os.chmod(file, 0o600)
        got = run_child(root, cache)
        assert not got["restored"], (at, got)
        assert rewritten_or_gone(root, cache, file)


def test_another_workspaces_file_under_this_name_is_discarded(tmp_path: Path, cache: Path) -> None:
    _, file = saved(tmp_path, cache)
    other = tree(tmp_path / "other")
    run_child(other, cache, warm=True)
    (other_file,) = [f for f in cached_files(cache) if f != file]
    shutil.copyfile(file, other_file)  # a valid file, checksum and all, of the wrong workspace
    got = run_child(other, cache)
    assert not got["restored"], got


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_file_of_another_user_is_not_read(tmp_path: Path, cache: Path) -> None:
    root, file = saved(tmp_path, cache)
    os.chown(file, 65534, 65534)
    got = run_child(root, cache)
    assert not got["restored"], got


def test_a_symlink_in_place_of_the_file_is_not_followed(tmp_path: Path, cache: Path) -> None:
    root, file = saved(tmp_path, cache)
    target = tmp_path / "elsewhere.idx"
    os.replace(file, target)
    file.symlink_to(target)
    got = run_child(root, cache)
    assert not got["restored"], got
    assert target.exists()


def test_a_folder_others_can_write_to_is_not_used(tmp_path: Path, cache: Path) -> None:
    root, file = saved(tmp_path, cache)
    os.chmod(cache, 0o777)
    got = run_child(root, cache)
    assert not got["restored"], got
    file.unlink()
    run_child(root, cache, mode="build")
    assert not cached_files(cache)  # nothing written there either


def test_a_cache_inside_the_workspace_is_not_used(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws")
    inside = root / "cache"
    got = run_child(root, inside, mode="build")
    assert not got["restored"]
    assert not list(inside.glob("*.idx"))  # the index would list its own file
    outside = tmp_path / "cache"
    run_child(root, outside, mode="build")
    assert len(cached_files(outside)) == 1  # the same build, with the cache outside, is saved


def test_at_most_the_configured_number_of_files_are_kept(tmp_path: Path, cache: Path) -> None:
    env = {"TOOLROUTE_SEARCH_INDEX_CACHE_FILES": "3"}
    roots = [tree(tmp_path / f"ws{i}") for i in range(5)]
    for root in roots:
        run_child(root, cache, warm=True, env=env)
        time.sleep(0.02)
    assert len(cached_files(cache)) == 3
    assert not run_child(roots[0], cache, env=env)["restored"]  # the least recently used went
    assert run_child(roots[4], cache, env=env)["restored"]


def test_a_process_killed_while_saving_leaves_a_whole_file_or_none(tmp_path: Path, cache: Path) -> None:
    """SIGKILL at spread-out moments of a build and its save (a tree whose index takes a while to
    write): whatever is left under a cache name is a whole file that restores; a half-written one
    only ever exists under a temporary name."""
    root = tmp_path / "ws"
    for d in range(30):
        (root / f"d{d}").mkdir(parents=True)
        for i in range(100):
            body = " ".join(f"w{(d * 131 + i * 17 + k) % 5000}" for k in range(60))
            (root / f"d{d}" / f"f{i}.py").write_text(f"needle {d} {i}\n{body}\n")
    argv = [sys.executable, "-c", CHILD, str(root), "warm", str(cache)]
    env = {**os.environ, "TOOLROUTE_SEARCH_INDEX_CACHE": str(cache)}
    # When does the file appear on this machine? Kill around that moment.
    began = time.monotonic()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not cached_files(cache) and child.poll() is None and time.monotonic() - began < 60:
        time.sleep(0.002)
    saved_at = time.monotonic() - began
    child.wait(timeout=60)
    assert cached_files(cache)
    for factor in [0.5, 0.7, 0.8, 0.85, 0.9, 0.93, 0.96, 0.98, 1.0, 1.02, 1.05, 1.2]:
        for f in cache.iterdir():
            f.unlink()
        child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(saved_at * factor)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        left = sorted(f.name for f in cache.iterdir())
        if cached_files(cache):
            got = run_child(root, cache)
            assert got["restored"], (factor, left, got)  # a name that exists holds a whole index
        run_child(root, cache)  # and leftovers never break the next process (answers checked)


def test_the_cache_stays_within_its_byte_budget(tmp_path: Path, cache: Path) -> None:
    roots = [tree(tmp_path / f"ws{i}") for i in range(3)]
    run_child(roots[0], cache, warm=True)
    (one,) = cached_files(cache)
    # Room for two indexes of about this size, not three. Not "two exactly": the walk's threads
    # shard the postings as they are scheduled, so the same tree's file differs by some bytes
    # from one build to the next under load (6,976 or 7,000 bytes here: a margin of 10 failed).
    budget = one.stat().st_size * 5 // 2
    env = {"TOOLROUTE_SEARCH_INDEX_CACHE_BYTES": str(budget)}
    for root in roots[1:]:
        time.sleep(0.02)
        run_child(root, cache, warm=True, env=env)
    assert sum(f.stat().st_size for f in cached_files(cache)) <= budget
    assert len(cached_files(cache)) == 2
    assert not run_child(roots[0], cache, env=env)["restored"]  # the least recently used went
    assert run_child(roots[2], cache, env=env)["restored"]


def test_a_short_lived_process_leaves_the_next_an_index_that_is_up_to_date(tmp_path: Path, cache: Path) -> None:
    """A restored index whose check found changes saves itself again as soon as it has re-read
    them, so the next process does not find the same files to re-read."""
    root = tree(tmp_path / "ws")
    run_child(root, cache, warm=True)
    (root / "src" / "m3.py").write_text("needle changed\n")
    second = run_child(root, cache, warm=True)
    assert second["restored"] and second["dirty"] >= 1, second  # found the change, searched it fresh
    third = run_child(root, cache)
    assert third["restored"] and third["dirty"] == 0, third


def test_a_temporary_file_of_a_killed_writer_is_cleared(tmp_path: Path, cache: Path) -> None:
    root, file = saved(tmp_path, cache)
    dead = next(pid for pid in range(4_000_000, 3_000_000, -1) if not Path(f"/proc/{pid}").exists())
    leftover = cache / f".tmp-{dead}-{file.name}"
    leftover.write_bytes(b"half a save")
    alive = cache / f".tmp-{os.getpid()}-{file.name}"  # a live writer's (this process's) is kept
    alive.write_bytes(b"being written")
    file.unlink()
    run_child(root, cache, warm=True)  # its save clears what dead writers left
    assert not leftover.exists() and alive.exists()
