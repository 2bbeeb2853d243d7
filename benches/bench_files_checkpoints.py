"""Safe editing's costs: a checkpoint per call, the stale-read guard, and the store after 1,000 edits.

Run: python -m pytest benches/bench_files_checkpoints.py -s   (interleaved: benches/_interleave.py)

The same tool calls with and without the feature, alternating round by round; the ratio printed
is with / without (how many times the call costs with it; 1.0 = free). A checkpoint per call is
the worst case (the agent layer takes one per batch, before its calls). The workspace holds 2,000
files beside the one written (a small repository), so a checkpoint's scan has work to do.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _interleave import compare

from toolroute.checkpoints import CheckpointLimits
from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

ROUNDS = 30
REPO_FILES = 2_000


def repo(root: Path) -> Path:
    rng = random.Random(3)
    for i in range(REPO_FILES):
        folder = root / f"pkg{i % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text("".join(f"x_{j} = {rng.random()}\n" for j in range(40)))
    return root


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    # On the disk workspaces live on (/tmp may be a memory file system).
    folder = Path(tempfile.mkdtemp(prefix="toolroute-bench-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def routers(base: Path, name: str, **options: object) -> tuple[ToolRouter, BuiltInToolContext]:
    ws = repo(base / name / "ws")
    time.sleep(1.1)  # a repository's files are older than the clock's racy second (steady state)
    ctx = BuiltInToolContext(ws, checkpoint_dir=base / name / "state", **options)  # type: ignore[arg-type]
    return ToolRouter(context=ctx), ctx


@pytest.mark.parametrize("size", [1024, 1024 * 1024], ids=["1KB", "1MB"])
def test_write_file_with_a_checkpoint_per_call(base: Path, size: int) -> None:
    plain, _ = routers(base, f"plain-{size}")
    checked, ctx = routers(base, f"checked-{size}")
    ctx.checkpoints.take("first")  # the first checkpoint copies the workspace once
    rng = random.Random(5)
    content = "".join(rng.choice("abcdef\n") for _ in range(size))
    n = [0]

    def write(r: ToolRouter, checkpoint: bool) -> str:
        n[0] += 1
        body = f"{n[0]}\n" + content[: size - 8]
        if checkpoint:
            ctx.checkpoints.take()
        return r.invoke("write_file", {"path": "out.txt", "content": body}).split(" (")[0]

    compare(
        f"write_file {size // 1024} KB, checkpoint per call (with/without)",
        ("without", lambda: write(plain, False)),
        {"with a checkpoint": lambda: write(checked, True)},
        ROUNDS,
    )


def test_bash_with_a_checkpoint_per_call(base: Path) -> None:
    plain, _ = routers(base, "bash-plain")
    checked, ctx = routers(base, "bash-checked")
    ctx.checkpoints.take("first")

    def run(r: ToolRouter, checkpoint: bool) -> str:
        if checkpoint:
            ctx.checkpoints.take()
        out = r.execute("bash", {"command": "echo built > build.log"})
        return str(out.trace["exitCode"])

    compare(
        "bash (echo > file), checkpoint per call (with/without)",
        ("without", lambda: run(plain, False)),
        {"with a checkpoint": lambda: run(checked, True)},
        ROUNDS,
    )


def test_edit_with_the_stale_read_guard(base: Path) -> None:
    guarded, _ = routers(base, "guard-on")
    unguarded, _ = routers(base, "guard-off", guard_stale_reads=False)
    big = "".join(f"line {i} = {i * 7}\n" for i in range(60_000))  # about 1 MB
    for r in (guarded, unguarded):
        r.invoke("write_file", {"path": "big.txt", "content": big})
        r.invoke("read_file", {"path": "big.txt", "limit": 1})
    flip = {id(guarded): False, id(unguarded): False}

    def edit(r: ToolRouter) -> str:
        flip[id(r)] = not flip[id(r)]
        old, new = ("line 500 = 3500", "line 500 = 0") if flip[id(r)] else ("line 500 = 0", "line 500 = 3500")
        return r.invoke("edit", {"path": "big.txt", "old_string": old, "new_string": new})

    compare(
        "edit 1 MB file, stale-read guard (on/off)",
        ("guard off", lambda: edit(unguarded)),
        {"guard on": lambda: edit(guarded)},
        ROUNDS,
    )


@pytest.mark.parametrize("size", [100_000, 5_000_000], ids=["100KB", "5MB"])
def test_read_file_page_with_the_stale_read_guard(base: Path, size: int) -> None:
    guarded, _ = routers(base, f"read-on-{size}")
    unguarded, _ = routers(base, f"read-off-{size}", guard_stale_reads=False)
    body = "".join(f"row {i} of the log\n" for i in range(size // 18))
    for r in (guarded, unguarded):
        r.invoke("write_file", {"path": "log.txt", "content": body})
    time.sleep(2.1)  # a log written earlier (a large file just written is hashed whole)

    def read(r: ToolRouter) -> str:
        return r.invoke("read_file", {"path": "log.txt", "limit": 50})

    compare(
        f"read_file page (50 lines) of a {size // 1000} KB file, stale-read guard (on/off)",
        ("guard off", lambda: read(unguarded)),
        {"guard on": lambda: read(guarded)},
        ROUNDS,
    )


@pytest.mark.parametrize("files", [2_000, 20_000])
def test_first_and_later_checkpoints_by_workspace_size(base: Path, files: int) -> None:
    ws = base / f"size-{files}" / "ws"
    rng = random.Random(9)
    for i in range(files):
        folder = ws / f"pkg{i % 200}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text("".join(f"x_{j} = {rng.random()}\n" for j in range(40)))
    time.sleep(1.1)
    ctx = BuiltInToolContext(ws, checkpoint_dir=base / f"size-{files}" / "state")
    started = time.perf_counter()
    first = ctx.checkpoints.take()
    first_s = time.perf_counter() - started
    later = []
    for _ in range(15):
        started = time.perf_counter()
        ctx.checkpoints.take()
        later.append(time.perf_counter() - started)
    later.sort()
    print(
        f"\ncheckpoint of {files:,} files ({first.added_bytes / 1e6:.1f} MB): first {first_s * 1e3:.0f} ms, "
        f"later (nothing changed) median {later[len(later) // 2] * 1e3:.1f} ms"
    )


def test_the_store_after_1000_edits_of_a_1mb_file(base: Path) -> None:
    ws = base / "store" / "ws"
    ws.mkdir(parents=True)
    rng = random.Random(11)
    lines = [f"{i:06d} {rng.getrandbits(64):016x}\n" for i in range(40_000)]
    (ws / "big.txt").write_text("".join(lines))
    # Every checkpoint kept (the default keeps 100): the store's size is the deduplication's.
    limits = CheckpointLimits(max_checkpoints=2_000)
    ctx = BuiltInToolContext(ws, durability="none", checkpoint_dir=base / "store" / "state", checkpoint_limits=limits)
    r = ToolRouter(context=ctx)
    r.invoke("read_file", {"path": "big.txt", "limit": 1})
    for n in range(1000):
        ctx.checkpoints.take(f"edit {n}")
        i = rng.randrange(len(lines))
        new = f"{i:06d} edit {n}\n"
        r.invoke("edit", {"path": "big.txt", "old_string": lines[i], "new_string": new})
        lines[i] = new
    ctx.checkpoints.take("last")
    size = (ws / "big.txt").stat().st_size
    stored = ctx.checkpoints.store_bytes
    kept = len(ctx.checkpoints.list())
    print(
        f"\nstore after 1,000 edits of a {size / 1e6:.2f} MB file, a checkpoint before each: "
        f"{stored / 1e6:.1f} MB for {kept} checkpoints kept (whole copies: {kept * size / 1e6:.0f} MB; "
        f"{stored / size:.1f}x the file)"
    )
    assert kept == 1001
    assert stored < kept * size / 10
    first = ctx.checkpoints.list()[0]
    report = ctx.checkpoints.rewind(first.id)
    assert report.restored == ("big.txt",)
