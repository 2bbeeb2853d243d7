"""The grep index (issue 16) never changes an answer: on random small trees (ignore files, hidden
and binary files, subfolders) and random queries, the whole tool output with the index warm equals
the output with the index off; and it stays so while another process edits, creates, deletes and
renames files and ignore rules between queries, and right after writes through the tools."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _search_helpers import call, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolroute import _core
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

WORDS = ["needle", "Needle", "NEEDLE", "hay", "stack", "alpha", "beta", "parking", "Kelvin"]
PATTERNS = [
    "needle",
    "Needle",
    "hay stack",
    "alpha",
    r"ne+dle",
    r"(alpha|beta) \w+",
    "(?i)NEEDLE",
    "(?i)parking",
    r"st[a-z]ck",
    "^hay",
    "[Nn]eedle",
    r"a\w*a",
    "x?",
    "needle|zzz",
    "bin",
]
GLOBS = [None, "*.py", "!*.txt", "d1/**", "*.{py,rs}", "!tmp*/", "!d1/"]
TYPES = [None, "py", "rust", "!md"]


@contextmanager
def index_off() -> Iterator[None]:
    os.environ["TOOLROUTE_SEARCH_INDEX"] = "0"
    try:
        yield
    finally:
        del os.environ["TOOLROUTE_SEARCH_INDEX"]


def random_tree(root: Path, rng: random.Random) -> list[str]:
    """A tree like a small repository; returns its folders."""
    dirs = [""]
    for i in range(rng.randint(2, 6)):
        parent = rng.choice(dirs)
        dirs.append(f"{parent}/{rng.choice(['d', 'tmp', '.h', 'sub'])}{i}".lstrip("/"))
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    for n in range(rng.randint(8, 25)):
        d = rng.choice(dirs)
        name = f".hidden{n}" if rng.random() < 0.1 else f"{rng.choice(['f', 'keep', 'm'])}{n}"
        name += rng.choice([".py", ".rs", ".txt", ".md", ".log"])
        if rng.random() < 0.1:
            content = rng.choice([b"needle\x00bin", b"\x00needle", b"hay\nneedle stack\n\x00\x01"])
        elif rng.random() < 0.05:
            content = "\ufeffneedle\n".encode("utf-16")
        else:
            lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 6))]
            content = ("\n".join(lines) + "\n").encode()
        write(root, f"{d}/{name}".lstrip("/"), content)
    for d in rng.sample(dirs, k=min(len(dirs), rng.randint(1, 2))):
        rules = rng.sample(["*.log", "tmp*/", "!keep*.log", "m*.md", "/f1.txt"], k=rng.randint(1, 3))
        write(root, f"{d}/.gitignore".lstrip("/"), "\n".join(rules) + "\n")
    return dirs


queries = st.fixed_dictionaries(
    {
        "pattern": st.sampled_from(PATTERNS),
        "case_insensitive": st.booleans(),
        "fixed_strings": st.booleans(),
        "word": st.booleans(),
        "output_mode": st.sampled_from(["content", "files_with_matches", "count"]),
        "context": st.integers(0, 2),
        "glob": st.sampled_from(GLOBS),
        "type": st.sampled_from(TYPES),
        "multiline": st.booleans(),
        "hidden": st.booleans(),
        "no_ignore": st.booleans(),
    }
)


def grep_both(router: ToolRouter, tool: str = "grep", **args: Any) -> tuple[Any, Any]:
    args = {k: v for k, v in args.items() if v is not None}
    indexed = call(router, tool, **args)
    with index_off():
        plain = call(router, tool, **args)
    return indexed, plain


def router_for(root: Path) -> ToolRouter:
    return ToolRouter(context=BuiltInToolContext(root))


def confinement(root: Path) -> Any:
    return BuiltInToolContext(root).confinement


def warm(root: Path) -> None:
    assert _core.search_index_warm(confinement(root), timeout=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    qs=st.lists(queries, min_size=4, max_size=8),
    starts=st.lists(st.integers(0, 9), min_size=4, max_size=8),
)
def test_indexed_output_equals_unindexed(seed: int, qs: list[dict[str, Any]], starts: list[int]) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        dirs = random_tree(root, rng)
        router = router_for(root)
        warm(root)
        assert _core.search_index_stats(confinement(root))["state"] == "ready"
        for hidden in (False, True):
            for no_ignore in (False, True):
                assert _core.search_index_warm(confinement(root), timeout=30, hidden=hidden, no_ignore=no_ignore)
        from_root = 0
        for q, s in zip(qs, starts, strict=False):
            path = dirs[s % len(dirs)] or None
            from_root += path is None
            indexed, plain = grep_both(router, path=path, **q)
            assert indexed == plain, (q, path)
            sort = "path" if s % 2 else "modified"
            pattern = q["glob"] or "*.py"
            indexed, plain = grep_both(router, "glob", pattern=pattern, path=path, sort=sort, hidden=q["hidden"])
            assert indexed == plain, ("glob", q["glob"], path)
        # Queries from the root are answered by the index (those in hidden or ignored folders scan).
        served = sum(
            _core.search_index_stats(confinement(root), hidden=h, no_ignore=n)["served"]
            for h in (False, True)
            for n in (False, True)
        )
        assert served >= from_root


def test_an_index_serves_and_reports_itself(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "needle\n")
    write(tmp_path, "b.txt", "hay\x00needle\n")
    router = router_for(tmp_path)
    conf = confinement(tmp_path)
    assert _core.search_index_stats(conf)["state"] == "none"
    warm(tmp_path)
    stats = _core.search_index_stats(conf)
    assert stats["state"] == "ready" and stats["files"] == 2 and stats["memory"] > 0
    indexed, plain = grep_both(router, pattern="needle")
    assert indexed == plain
    assert indexed[1]["skipped"]["binary"] == 1 and indexed[1]["skipped"]["files"] == 2
    assert _core.search_index_stats(conf)["served"] == 1


CHANGES = r"""
import os, sys
root = sys.argv[1]
step = sys.argv[2]
p = lambda *a: os.path.join(root, *a)
if step == "edit":
    open(p("d0", "a.py"), "a").write("new needle here\n")
elif step == "create":
    os.makedirs(p("fresh", "deep"), exist_ok=True)
    open(p("fresh", "deep", "n.py"), "w").write("needle in a new folder\n")
    open(p("top.py"), "w").write("needle at the top\n")
elif step == "delete":
    os.remove(p("d0", "b.txt"))
elif step == "rename":
    os.rename(p("d0", "a.py"), p("d0", "renamed.txt"))
    os.rename(p("d1"), p("moved"))
elif step == "gitignore":
    open(p(".gitignore"), "a").write("*.txt\n")
elif step == "ungitignore":
    open(p(".gitignore"), "w").write("*.log\n")
elif step == "binary":
    open(p("d0", "c.py"), "wb").write(b"needle\x00")
elif step == "replace":
    # An editor's save: a new file renamed over the old one (no write event on the old name).
    open(p("d0", "tmp.swp"), "w").write("needle replaced\n")
    os.replace(p("d0", "tmp.swp"), p("d0", "c.py"))
elif step == "swap":
    # A folder swapped for another holding the same names, between two queries.
    os.makedirs(p("s1"), exist_ok=True)
    open(p("s1", "f.py"), "w").write("needle swapped\n")
    os.rename(p("moved"), p("old"))
    os.rename(p("s1"), p("moved"))
elif step == "hidden":
    open(p(".secret.py"), "w").write("needle\n")
"""


NO_WATCH = "the portable build has no inotify watch: it always checks (the 'checking' cases)"


@pytest.mark.parametrize(
    "watch", [pytest.param("inotify", marks=pytest.mark.skipif(_core.PORTABLE, reason=NO_WATCH)), "checking"]
)
def test_changes_by_another_process_are_seen_at_once(tmp_path: Path, monkeypatch: Any, watch: str) -> None:
    if watch == "checking":
        # No watch: every folder and file is checked before each answer instead.
        monkeypatch.setenv("TOOLROUTE_SEARCH_INDEX_WATCH", "0")
    write(tmp_path, ".gitignore", "*.log\n")
    write(tmp_path, "d0/a.py", "alpha\n")
    write(tmp_path, "d0/b.txt", "needle\n")
    write(tmp_path, "d0/c.py", "needle\n")
    write(tmp_path, "d1/x.log", "needle\n")
    write(tmp_path, "d1/y.md", "needle beta\n")
    write(tmp_path, "d1/f.py", "alpha\n")
    router = router_for(tmp_path)
    warm(tmp_path)
    assert _core.search_index_stats(confinement(tmp_path))["watching"] == (watch == "inotify")
    steps = ["edit", "create", "delete", "rename", "binary", "replace", "swap", "hidden", "gitignore", "ungitignore"]
    for step in steps:
        subprocess.run([sys.executable, "-c", CHANGES, str(tmp_path), step], check=True)
        for args in (
            {"pattern": "needle"},
            {"pattern": "needle", "output_mode": "count", "glob": "*.py"},
            {"pattern": "NEEDLE", "case_insensitive": True, "output_mode": "files_with_matches"},
        ):
            indexed, plain = grep_both(router, **args)
            assert indexed == plain, (step, args)
        indexed, plain = grep_both(router, "glob", pattern="**/*.py")
        assert indexed == plain, step
        # The index comes back after a rule change (rebuilt in the background).
        warm(tmp_path)


def test_writes_through_the_tools_are_seen_by_the_next_query(tmp_path: Path) -> None:
    write(tmp_path, "m.py", "alpha\n")
    router = router_for(tmp_path)
    warm(tmp_path)
    call(router, "write_file", path="new.py", content="needle one\n")
    indexed, plain = grep_both(router, pattern="needle")
    assert indexed == plain and "new.py" in indexed[0]
    call(router, "edit", path="m.py", old_string="alpha", new_string="needle two")
    indexed, plain = grep_both(router, pattern="needle two")
    assert indexed == plain and "m.py" in indexed[0]


@pytest.mark.parametrize(
    "watch", [pytest.param("inotify", marks=pytest.mark.skipif(_core.PORTABLE, reason=NO_WATCH)), "checking"]
)
def test_git_commands_keep_the_index_and_the_second_query_builds_it(
    tmp_path: Path, monkeypatch: Any, watch: str
) -> None:
    if watch == "checking":
        # Without a watch, a commit changes `.git`'s ctime: that alone must not rebuild.
        monkeypatch.setenv("TOOLROUTE_SEARCH_INDEX_WATCH", "0")
    write(tmp_path, "a.py", "needle\n")
    write(tmp_path, ".gitignore", "*.log\n")
    router = router_for(tmp_path)
    conf = confinement(tmp_path)
    call(router, "grep", pattern="needle")
    assert _core.search_index_stats(conf)["state"] == "none"  # one query never pays for a build
    call(router, "grep", pattern="needle")
    assert _core.search_index_stats(conf)["state"] in ("building", "ready")
    warm(tmp_path)
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=n"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    warm(tmp_path)  # `.git` appearing changes the rules: rebuilt
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=tmp_path, check=True)
    indexed, plain = grep_both(router, pattern="needle")
    assert indexed == plain
    assert _core.search_index_stats(conf)["state"] == "ready"  # git's own files do not break it


def test_an_unused_index_is_evicted(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TOOLROUTE_SEARCH_INDEX_TTL", "0")
    write(tmp_path, "a.py", "needle\n")
    warm(tmp_path)
    deadline = time.monotonic() + 5
    while _core.search_index_stats(confinement(tmp_path))["state"] != "none":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def random_change(root: Path, rng: random.Random) -> str:
    """Python source for one random change to the tree (run by another process)."""
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    dirs = [root] + [p for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts]
    new_dir = rng.choice(dirs) / f"n{rng.randrange(1000)}"
    text = rng.choice(["needle\n", "hay stack\n", "Needle beta\n", "needle\x00bin\n"])
    ops = [f"open({str(new_dir) + '.py'!r}, 'w').write({text!r})"]
    if files:
        f = rng.choice(files)
        ops += [
            f"open({str(f)!r}, 'a').write({text!r})",
            f"os.remove({str(f)!r})",
            f"os.rename({str(f)!r}, {str(rng.choice(dirs) / ('m' + f.name))!r})",
            f"open({str(f) + '.tmp'!r}, 'w').write({text!r}); os.replace({str(f) + '.tmp'!r}, {str(f)!r})",
        ]
    ops.append(f"os.makedirs({str(new_dir / 'deep')!r}); open({str(new_dir / 'deep' / 'x.py')!r}, 'w').write({text!r})")
    if len(dirs) > 2:
        a, b = rng.sample(dirs[1:], 2)
        if not (a in b.parents or b in a.parents):
            ops.append(f"os.rename({str(a)!r}, {str(a) + '_'!r}); os.rename({str(b)!r}, {str(a)!r})")
            ops.append(f"shutil.rmtree({str(b)!r})")
            ops.append(f"os.rename({str(b)!r}, {str(a / ('r' + b.name))!r})")
    ops.append(f"open({str(rng.choice(dirs) / '.hid.py')!r}, 'w').write({text!r})")
    return "import os, shutil\n" + rng.choice(ops)


@pytest.mark.parametrize("watch", ["inotify", "checking"])
@pytest.mark.parametrize("seed", range(3))
def test_random_changes_by_another_process(tmp_path: Path, monkeypatch: Any, watch: str, seed: int) -> None:
    if watch == "checking":
        monkeypatch.setenv("TOOLROUTE_SEARCH_INDEX_WATCH", "0")
    rng = random.Random(seed)
    random_tree(tmp_path, rng)
    router = router_for(tmp_path)
    warm(tmp_path)
    for step in range(15):
        code = random_change(tmp_path, rng)
        subprocess.run([sys.executable, "-c", code], check=True)
        for args in ({"pattern": "needle"}, {"pattern": "needle", "output_mode": "count", "glob": "*.py"}):
            indexed, plain = grep_both(router, **args)
            assert indexed == plain, (step, code, args)
        indexed, plain = grep_both(router, "glob", pattern="*.py", sort="path")
        assert indexed == plain, (step, code)
        if _core.search_index_stats(confinement(tmp_path))["state"] != "ready":
            warm(tmp_path)  # a rule file changed: rebuilt


EVICTION_CHILD = r"""
import json, os, sys, time
from pathlib import Path
from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext

def inotify_fds():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return n

base = Path(sys.argv[1])
confs = []
for i in range(6):
    ws = base / f"user{i}"
    ws.mkdir()
    (ws / "a.py").write_text(f"needle {i}\n")
    conf = BuiltInToolContext(ws).confinement
    assert _core.search_index_warm(conf, timeout=30)
    confs.append(conf)
    time.sleep(0.01)  # distinct last-used times
deadline = time.monotonic() + 20
while inotify_fds() > 2 and time.monotonic() < deadline:
    time.sleep(0.05)
states = [_core.search_index_stats(c)["state"] for c in confs]
settled = inotify_fds()
answers = [_core.grep(c, GrepRequest(pattern="needle"), max_line_bytes=100).rows()[0]["text"] for c in confs]
# An evicted workspace comes back from the on-disk cache, evicting another in turn.
deadline = time.monotonic() + 20
while inotify_fds() > 2 and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"fds": settled, "fds_after": inotify_fds(), "states": states, "answers": answers}))
"""


def test_live_indexes_are_bounded_and_the_least_recent_go_first(tmp_path: Path) -> None:
    """With TOOLROUTE_SEARCH_INDEX_MAX=2, six workspaces indexed one after another leave two live
    indexes (and two inotify descriptors): the two most recent. Querying the others again brings
    them back from the on-disk cache, within the same budget."""
    env = {**os.environ, "TOOLROUTE_SEARCH_INDEX_MAX": "2"}
    child = subprocess.run(
        [sys.executable, "-c", EVICTION_CHILD, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert child.returncode == 0, child.stderr[-3000:]
    seen = json.loads(child.stdout.strip().splitlines()[-1])
    assert seen["fds"] <= 2 and seen["fds_after"] <= 2, seen
    assert seen["states"] == ["none"] * 4 + ["ready"] * 2, seen
    assert seen["answers"] == [f"needle {i}" for i in range(6)], seen


MEMORY_CHILD = r"""
import json, os, sys, time
from pathlib import Path
from toolroute import _core
from toolroute.context import BuiltInToolContext

base = Path(sys.argv[1])
confs = []
for i in range(4):
    ws = base / f"user{i}"
    ws.mkdir()
    for f in range(150):
        (ws / f"m{f}.py").write_text(" ".join(f"w{i}_{f}_{k}" for k in range(200)) + "\n")
    confs.append(BuiltInToolContext(ws).confinement)
assert _core.search_index_warm(confs[0], timeout=30)
one = _core.search_index_stats(confs[0])["memory"]
os.environ["TOOLROUTE_SEARCH_INDEX_MEMORY"] = str(int(one * 1.5))  # room for one such index, not two
for conf in confs[1:]:
    assert _core.search_index_warm(conf, timeout=30)
    time.sleep(0.01)
deadline = time.monotonic() + 20
states = []
while time.monotonic() < deadline:
    states = [_core.search_index_stats(c)["state"] for c in confs]
    if states.count("ready") == 1:
        break
    time.sleep(0.05)
print(json.dumps({"one": one, "states": states}))
"""


def test_live_indexes_are_bounded_by_memory_too(tmp_path: Path) -> None:
    """TOOLROUTE_SEARCH_INDEX_MEMORY bounds what the live indexes hold together: with room for
    one, each new index pushes out the least recently used (eviction by pressure, not by age)."""
    env = {**os.environ, "TOOLROUTE_SEARCH_INDEX_CACHE": "0"}
    child = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert child.returncode == 0, child.stderr[-3000:]
    seen = json.loads(child.stdout.strip().splitlines()[-1])
    assert seen["one"] > 0 and seen["states"] == ["none", "none", "none", "ready"], seen
