"""Checkpoints and rewind (docs/safe-editing.md, "Checkpoints and rewind"): a rewind puts back the tree
byte for byte and mode for mode, whoever changed it (the file tools or a command), all or nothing."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tree import leftovers, tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolroute import BuiltInToolContext, ToolError, ToolPreconditionError, ToolRouter, builtin_tool_context
from toolroute.agent import ToolCallRunner, allow_all
from toolroute.checkpoints import OUTSIDE_NOTE, CheckpointLimits, default_state_dir


def make_context(ws: Path, state: Path, **options: object) -> BuiltInToolContext:
    return BuiltInToolContext(ws, durability="none", checkpoint_dir=state, **options)  # type: ignore[arg-type]


@pytest.fixture
def space(deployed: Path) -> tuple[Path, Path]:
    ws = deployed / "ws"
    ws.mkdir()
    return ws, deployed / "state"


@pytest.fixture
def r(space: tuple[Path, Path]) -> Iterator[ToolRouter]:
    ws, state = space
    ctx = make_context(ws, state)
    with builtin_tool_context(ctx):
        router = ToolRouter()
        yield router
        router.close()


def sh(r: ToolRouter, command: str) -> None:
    r.invoke("bash", {"command": command})


def test_a_rewind_undoes_the_file_tools_and_commands_alike(r: ToolRouter, space: tuple[Path, Path]) -> None:
    ws, _ = space
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('v1')\n")
    (ws / "notes.md").write_text("keep\n")
    (ws / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(ws / "run.sh", 0o755)
    before = tree(ws)
    first = r.checkpoint("start")
    assert first.files == 3 and first.uncovered == ()
    r.invoke("edit", {"path": "src/app.py", "old_string": "v1", "new_string": "v2"})
    r.invoke("write_file", {"path": "src/new.py", "content": "x = 1\n"})
    r.invoke("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: notes.md\n*** End Patch\n"})
    sh(r, "sed -i 's/v2/v3/' src/app.py && mkdir -p build/out && echo bin > build/out/a.o && chmod 600 run.sh")
    sh(r, "mv src/new.py src/moved.py && rm -f run.sh && printf 'again\\n' > run.sh")
    report = r.rewind(first.id)
    assert tree(ws) == before
    assert set(report.restored) == {"src/app.py", "notes.md", "run.sh"}
    assert {"src/moved.py", "build/out/a.o", "build/out", "build"} <= set(report.removed)
    assert report.unrestorable == ()
    assert "Rewound to checkpoint 1" in report.describe()
    assert report.describe().endswith(OUTSIDE_NOTE)
    # The rewind can itself be undone.
    r.rewind(report.undo)
    assert (ws / "src" / "app.py").read_text() == "print('v3')\n"
    assert (ws / "build" / "out" / "a.o").read_text() == "bin\n"
    assert [c.id for c in r.checkpoints()] == [1, 2, 3]


def test_what_cannot_be_put_back_is_named(space: tuple[Path, Path]) -> None:
    ws, state = space
    ctx = make_context(ws, state, checkpoint_limits=CheckpointLimits(max_file_bytes=1000))
    (ws / "big.bin").write_bytes(b"b" * 5000)
    (ws / "small.txt").write_text("s\n")
    (ws / "dir").mkdir()
    (ws / "dir" / "inner.txt").write_text("inner\n")
    cp = ctx.checkpoints.take()
    assert cp.uncovered == (("big.bin", "5000 bytes, over the 1000-byte checkpoint limit for one file"),)
    (ws / "big.bin").write_bytes(b"c" * 5000)
    (ws / "small.txt").write_text("t\n")
    shutil.rmtree(ws / "dir")
    (ws / "elsewhere").mkdir()
    os.symlink("elsewhere", ws / "dir")  # the folder replaced by a link
    report = ctx.checkpoints.rewind(cp.id)
    why = dict(report.unrestorable)
    assert why["big.bin"].startswith("changed, and 5000 bytes, over the 1000-byte")
    assert why["dir/inner.txt"] == "the folder dir is now a link or a file"
    assert (ws / "small.txt").read_text() == "s\n"  # the rest was restored
    assert not (ws / "elsewhere" / "inner.txt").exists()  # never written through the link


def test_an_unchanged_file_is_not_read_again_but_a_same_size_rewrite_is_seen(space: tuple[Path, Path]) -> None:
    ws, state = space
    ctx = make_context(ws, state)
    (ws / "a.txt").write_text("aaaa\n")
    (ws / "b.txt").write_text("bbbb\n")
    stamp = (ws / "a.txt").stat()
    time.sleep(1.2)  # past the clock's racy window: stamps can be trusted
    first = ctx.checkpoints.take()
    second = ctx.checkpoints.take()
    assert first.added_bytes == 10 and second.added_bytes == 0
    (ws / "a.txt").write_text("AAAA\n")  # same size, and the old modification time put back
    os.utime(ws / "a.txt", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    third = ctx.checkpoints.take()
    assert third.added_bytes == 5  # the change time told it
    ctx.checkpoints.rewind(second.id)
    assert (ws / "a.txt").read_text() == "aaaa\n"


def test_a_thousand_versions_of_a_large_file_share_their_chunks(space: tuple[Path, Path]) -> None:
    ws, state = space
    ctx = make_context(ws, state)
    rng = random.Random(7)
    lines = [f"{i:06d} {rng.getrandbits(64):016x}\n" for i in range(40_000)]  # about 1 MB
    (ws / "big.txt").write_text("".join(lines))
    ctx.checkpoints.take()
    with builtin_tool_context(ctx):
        r = ToolRouter()
        r.invoke("read_file", {"path": "big.txt", "limit": 1})
        for n in range(60):
            i = rng.randrange(len(lines))
            old = lines[i]
            lines[i] = f"{i:06d} edited {n}\n"
            r.invoke("edit", {"path": "big.txt", "old_string": old, "new_string": lines[i]})
            ctx.checkpoints.take(f"edit {n}")
        r.close()
    size = (ws / "big.txt").stat().st_size
    # 61 versions of a ~1 MB file: the store holds about one copy plus a few chunks per edit.
    assert ctx.checkpoints.store_bytes < size + 60 * 3 * 64 * 1024
    assert ctx.checkpoints.store_bytes < 4 * size
    ctx.checkpoints.rewind(1)
    assert (ws / "big.txt").read_text().count("edited") == 0


def test_the_store_keeps_its_limits(space: tuple[Path, Path]) -> None:
    ws, state = space
    ctx = make_context(ws, state, checkpoint_limits=CheckpointLimits(max_checkpoints=3, max_store_bytes=64 * 1024))
    for n in range(6):
        (ws / f"f{n}.bin").write_bytes(os.urandom(20 * 1024))
        ctx.checkpoints.take(str(n))
    kept = ctx.checkpoints.list()
    assert len(kept) <= 3 and kept[-1].label == "5"
    assert ctx.checkpoints.store_bytes <= 64 * 1024 + 20 * 1024
    assert any(c.uncovered for c in kept)  # what did not fit is named
    with pytest.raises(ToolPreconditionError, match="no checkpoint 1"):
        ctx.checkpoints.rewind(1)


def test_the_store_must_be_outside_the_workspace_and_is_per_workspace_and_user(space: tuple[Path, Path]) -> None:
    ws, _ = space
    ctx = BuiltInToolContext(ws, checkpoint_dir=ws / ".state")
    with pytest.raises(ToolPreconditionError, match="must be outside the workspace"):
        ctx.checkpoints.take()
    assert default_state_dir(ws, "alice") != default_state_dir(ws, "bob") != default_state_dir(ws, None)
    alice = BuiltInToolContext(ws, user_id="alice").checkpoints
    assert alice.state_dir == default_state_dir(ws.resolve(), "alice")


def test_the_agent_layer_takes_one_before_each_batch_that_may_change_files(
    r: ToolRouter, space: tuple[Path, Path]
) -> None:
    ws, _ = space
    from toolroute.context import current_builtin_tool_context

    ctx = current_builtin_tool_context()
    assert ctx is not None
    (ws / "a.txt").write_text("1\n")
    runner = ToolCallRunner(r, policy=allow_all(), checkpoints=ctx.checkpoints)
    runner.run([{"name": "read_file", "arguments": {"path": "a.txt"}}])
    assert runner.last_checkpoint is None  # a read-only batch changes nothing
    runner.run(
        [
            {"name": "write_file", "arguments": {"path": "a.txt", "content": "2\n"}},
            {"name": "bash", "arguments": {"command": "echo 3 > b.txt"}},
        ]
    )
    assert runner.last_checkpoint is not None and "write_file" in runner.last_checkpoint.label
    r.rewind(runner.last_checkpoint.id)
    assert tree(ws, folders=False) == {"a.txt": ("file", 0o644 & ~_umask(), b"1\n")}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---- the property: any sequence of changes, any checkpoint, byte for byte ------------------

NAMES = ["a.txt", "b.txt", "d/c.txt", "d/e/f.txt"]
COMMANDS = [
    "echo more >> {n}",
    "sed -i 's/line/LINE/' {n}",
    "mv {n} {m}",
    "rm -f {n}",
    "mkdir -p d/e && echo fresh > {n}",
    "rm -rf d",
    "chmod 600 {n}",
    "chmod 755 {n}",
    "cp {n} {m}",
    "mkdir -p d/e/empty",
    "truncate -s 0 {n}",
]

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.text("ab\n", max_size=40)),
    st.tuples(st.just("edit"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("patch"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("bash"), st.sampled_from(COMMANDS), st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES))),
    st.tuples(st.just("checkpoint"), st.just(""), st.just("")),
)


def apply(r: ToolRouter, ws: Path, step: tuple) -> None:  # type: ignore[type-arg]
    kind, a, b = step
    try:
        if kind == "write":
            r.invoke("write_file", {"path": a, "content": f"line {a}\n{b}"})
        elif kind == "edit":
            r.invoke("read_file", {"path": a})
            r.invoke("edit", {"path": a, "old_string": "line", "new_string": "edited line"})
        elif kind == "patch":
            sections = []
            for name in dict.fromkeys([a, b]):
                if (ws / name).is_file() and "line" in (ws / name).read_text():
                    r.invoke("read_file", {"path": name})
                    first = next(ln for ln in (ws / name).read_text().splitlines() if "line" in ln)
                    sections.append(f"*** Update File: {name}\n@@\n-{first}\n+{first} patched")
                elif not (ws / name).exists():
                    sections.append(f"*** Add File: {name}\n+line added by patch")
            if sections:
                r.invoke("apply_patch", {"patch": "*** Begin Patch\n" + "\n".join(sections) + "\n*** End Patch\n"})
        elif kind == "bash":
            n, m = b
            r.invoke("bash", {"command": a.format(n=n, m=m)})
    except ToolError:
        pass  # a change refused (a missing file, a stale read) changes nothing, as for a model


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(op, min_size=1, max_size=14), pick=st.integers(min_value=0))
def test_rewinding_to_any_checkpoint_gives_the_tree_as_it_was(deployed: Path, steps: list, pick: int) -> None:  # type: ignore[type-arg]
    base = Path(os.path.realpath(deployed)) / f"run-{time.monotonic_ns()}"
    ws, state = base / "ws", base / "state"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("line one\nline two\n")
    ctx = make_context(ws, state)
    try:
        with builtin_tool_context(ctx):
            r = ToolRouter()
            taken = [(ctx.checkpoints.take("start").id, tree(ws))]
            for step in steps:
                if step[0] == "checkpoint":
                    taken.append((ctx.checkpoints.take().id, tree(ws)))
                else:
                    apply(r, ws, step)
            end = tree(ws)
            cid, expected = taken[pick % len(taken)]
            report = r.rewind(cid)
            assert report.unrestorable == ()
            assert tree(ws) == expected
            r.rewind(report.undo)  # and back again
            assert tree(ws) == end
            r.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- a crash during a rewind: the old tree or the restored one, never a mix -------------------

CHILD = """
import sys
from pathlib import Path
from toolroute import BuiltInToolContext
ctx = BuiltInToolContext(Path(sys.argv[1]), durability="full", checkpoint_dir=Path(sys.argv[2]))
print("go", flush=True)
ctx.checkpoints.rewind(1)
print("done", flush=True)
"""


def test_a_rewind_killed_at_any_moment_leaves_the_old_or_the_restored_tree(deployed: Path) -> None:
    template, state = deployed / "template", deployed / "state"
    template.mkdir()
    for i in range(150):
        (template / f"f{i:03d}.txt").write_text(f"checkpointed {i}\n" * 50)
    ctx = BuiltInToolContext(template, checkpoint_dir=state)
    ctx.checkpoints.take("start")
    checkpointed = tree(template, folders=False)
    for i in range(150):  # after the checkpoint: every file changed, some gone, some new
        if i % 5 == 0:
            (template / f"f{i:03d}.txt").unlink()
        else:
            (template / f"f{i:03d}.txt").write_text(f"changed {i}\n")
    for i in range(30):
        (template / f"new{i}.txt").write_text("new\n")
    changed = tree(template, folders=False)
    rng = random.Random(1)
    seen = set()
    for attempt in range(8):
        ws = deployed / f"ws{attempt}"
        shutil.copytree(template, ws, symlinks=True)
        # Each run rewinds a copy through a copy of the store (a store names files by their
        # path in the workspace, so it serves any copy of it).
        run_state = deployed / f"state{attempt}"
        shutil.copytree(state, run_state)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(ws), str(run_state)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "go"
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        journaled = bool(list(ws.glob(".toolroute-*.journal")))  # killed inside the transaction
        BuiltInToolContext(ws)  # the next use of the workspace finishes or undoes the transaction
        now = tree(ws, folders=False)
        assert now in (changed, checkpointed), f"a mix after a kill in attempt {attempt}"
        assert leftovers(ws) == []
        seen.add(("restored" if now == checkpointed else "old") + (" from a journal" if journaled else ""))
    print("outcomes seen:", sorted(seen))
    assert seen


TAKER = """
import sys
from pathlib import Path
from toolroute import BuiltInToolContext
from toolroute.checkpoints import CheckpointLimits
ws, state, tag, n, kept = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ctx = BuiltInToolContext(ws, checkpoint_dir=state, checkpoint_limits=CheckpointLimits(max_checkpoints=kept))
for i in range(n):
    (ws / f"{tag}-{i % 5}.txt").write_text(f"{tag} {i}\\n" * (i + 1) * 500)
    (ws / f"{tag}-sometimes-empty.txt").write_text("" if i % 2 else f"{tag} {i}\\n")  # the empty chunk comes and goes
    ctx.checkpoints.take(f"{tag} {i}")
print("done", flush=True)
"""


def _share_and_kill_one(ws: Path, state: Path, kept: int) -> None:
    """Two processes take 12 checkpoints each in one store while a third takes them until it is
    SIGKILLed somewhere in a take (a pack, an index or a manifest half-made, or a sweep)."""
    run = [sys.executable, "-c", TAKER, str(ws), str(state)]
    steady = [subprocess.Popen([*run, tag, "12", str(kept)], stdout=subprocess.PIPE, text=True) for tag in "ab"]
    doomed = subprocess.Popen([*run, "c", "1000", str(kept)], stdout=subprocess.PIPE, text=True)
    try:
        for p in steady:
            out, _ = p.communicate(timeout=120)
            assert out.strip() == "done"
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)


def _rewinds_whole(ctx: BuiltInToolContext, ids: list[int]) -> None:
    """Every checkpoint in `ids` can be rewound to (each chunk it names is in the store), and the
    newest one put back byte for byte."""
    ws = ctx.workspace
    after = ctx.checkpoints.take("after")  # the store takes the next one: the leftovers are cleaned
    assert after.id == ids[-1] + 1
    state = ctx.checkpoints.state_dir
    assert not list((state / "checkpoints").glob("*.tmp"))
    packs = {p.stem for p in (state / "packs").glob("*.pack")}
    assert packs == {p.stem for p in (state / "packs").glob("*.idx")}
    before = tree(ws, folders=False)
    for id_ in ids:
        ctx.checkpoints.rewind(id_)
    for f in ws.iterdir():
        f.write_text("scrambled\n")
    ctx.checkpoints.rewind(after.id)
    assert tree(ws, folders=False) == before


def test_processes_sharing_a_store_and_one_killed_leave_it_whole(deployed: Path) -> None:
    ws, state = deployed / "ws", deployed / "state"
    ws.mkdir()
    _share_and_kill_one(ws, state, kept=100_000)  # nothing pruned: every checkpoint taken is kept
    ctx = BuiltInToolContext(ws, checkpoint_dir=state, checkpoint_limits=CheckpointLimits(max_checkpoints=100_000))
    kept = ctx.checkpoints.list()
    ids = [c.id for c in kept]
    assert ids == list(range(1, len(ids) + 1)) and len(ids) >= 24  # none lost, none twice
    assert {c.label for c in kept} >= {f"{t} {i}" for t in "ab" for i in range(12)}
    first_of_b = next(c for c in kept if c.label == "b 0")
    _rewinds_whole(ctx, ids[-30:])
    ctx.checkpoints.rewind(first_of_b.id)  # one another process took: b-0.txt as b wrote it first
    assert (ws / "b-0.txt").read_text() == "b 0\n" * 500


def test_processes_pruning_a_shared_store_and_one_killed_leave_every_checkpoint_whole(deployed: Path) -> None:
    # Six kept: nearly every take prunes and sweeps packs another process's index knows.
    ws, state = deployed / "ws", deployed / "state"
    ws.mkdir()
    _share_and_kill_one(ws, state, kept=6)
    ctx = BuiltInToolContext(ws, checkpoint_dir=state)
    ids = [c.id for c in ctx.checkpoints.list()]
    assert 1 <= len(ids) <= 6 and ids == list(range(ids[0], ids[-1] + 1))  # the oldest went, in order
    assert ids[-1] >= 24
    _rewinds_whole(ctx, ids)


def _modes(store: Path) -> dict[str, int]:
    """Every path of the store (the store itself included, links never followed) and its mode."""
    found = {".": store.lstat().st_mode & 0o7777}
    for path in store.rglob("*"):
        found[str(path.relative_to(store))] = path.lstat().st_mode & 0o7777
    return found


def _private(modes: dict[str, int], store: Path) -> bool:
    return all(mode == (0o700 if (store / name).is_dir() else 0o600) for name, mode in modes.items())


def test_the_store_keeps_private_what_it_copies_even_through_a_planted_hard_link(
    r: ToolRouter, space: tuple[Path, Path]
) -> None:
    ws, state = space
    secret = ws.parent / "id_ed25519"  # a private file outside the workspace
    secret.write_bytes(b"PRIVATE KEY 0600 " * 64)
    secret.chmod(0o600)
    (ws / "config.env").write_text("TOKEN=also-private\n")
    (ws / "config.env").chmod(0o600)
    sh(r, f"ln {secret} planted")  # a command plants a hard link to it
    assert (ws / "planted").stat().st_ino == secret.stat().st_ino
    r.checkpoint("with a planted link")
    modes = _modes(state)
    assert len(modes) > 4 and _private(modes, state), modes
    packs = [p for p in state.rglob("*.pack")]
    assert any(secret.read_bytes()[:64] in p.read_bytes() for p in packs), "the bytes were not copied"
    # Another user cannot read them: the store stops it, not a folder above it.
    if os.geteuid() != 0:
        return  # (no other user to be without root)
    # (`ls -d` needs only the folders above the store to be open; `cat` needs the pack itself.)
    probe = 'ls -d "$1" >/dev/null || exit 3; shift; for p; do cat "$p" >/dev/null 2>&1 && echo "read $p"; done; true'
    nobody = 65534
    proc = subprocess.run(
        ["/bin/sh", "-c", probe, "sh", str(state), *map(str, packs)],
        user=nobody,
        group=nobody,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode == 3:
        pytest.skip(f"the folders above {state} are closed to other users: nothing to prove ({proc.stderr})")
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


def test_a_store_made_before_is_made_private_when_opened(space: tuple[Path, Path]) -> None:
    ws, state = space
    (ws / "a.txt").write_text("one\n")
    make_context(ws, state).checkpoints.take()
    for path in [state, *state.rglob("*")]:  # as an earlier version left it: 0755 folders, 0644 files
        path.chmod(0o755 if path.is_dir() else 0o644)
    outside = ws.parent / "not-the-store's"
    outside.write_text("x")
    outside.chmod(0o644)
    (state / "packs" / "a-link").symlink_to(outside)
    assert not _private(_modes(state), state)
    (ws / "a.txt").write_text("two\n")
    make_context(ws, state).checkpoints.take()  # the store is opened again
    modes = _modes(state)
    modes.pop("packs/a-link", None)  # a link is never followed (the store's sweep may remove it)
    assert _private(modes, state), modes
    assert outside.stat().st_mode & 0o777 == 0o644
