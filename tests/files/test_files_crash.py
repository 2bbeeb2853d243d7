"""SIGKILL during multi-file patches: after recovery no file is torn, no patch is half-applied and
no temp file is left. A child process applies a 20-file patch back and forth until it is killed
at a random moment; a new context on the workspace (which runs recovery) must then see every file
of the patch in the same version. Bounded: a fixed number of kills, each child at most seconds.

Then each step of a commit's order, one by one: strace kills the child on entry to an exact
system call of it (`-e inject=...:signal=KILL`: the call never runs), before, between and after
the two sync waves, and then recovery itself the same way; the next recovery must leave the
version each step calls for (the patch undone before every temp is staged, done after)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from _files_helpers import write

from toolroute import _core
from toolroute.context import BuiltInToolContext

FILES = 20
KILLS = 40
LINES = 200  # each file ~2 KB, so a torn write would show


def _body(version: str, i: int) -> str:
    return "".join(f"{version} file {i} line {n}\n" for n in range(LINES))


def _patch(src: str, dst: str) -> str:
    """Every file from version src to dst; f19 is deleted/added as a moved file, to cover both."""
    parts = ["*** Begin Patch"]
    for i in range(FILES - 1):
        parts += [f"*** Update File: f{i:02}.txt", "@@"]
        parts += [f"-{src} file {i} line {n}\n+{dst} file {i} line {n}" for n in range(LINES)]
    last = FILES - 1
    parts += [f"*** Delete File: {src}-{last}.txt", f"*** Add File: {dst}-{last}.txt"]
    parts += [f"+{dst} file {last} line {n}" for n in range(LINES)]
    parts.append("*** End Patch")
    return "\n".join(parts) + "\n"


# The child loads only the extension (not the whole package, for a quick start).
CHILD = r"""
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.ExtensionFileLoader("toolroute._core", sys.argv[6])
spec = importlib.util.spec_from_file_location("toolroute._core", sys.argv[6], loader=loader)
_core = importlib.util.module_from_spec(spec)
loader.exec_module(_core)
ws, durability = sys.argv[1], sys.argv[2]
forward, back = open(sys.argv[3]).read(), open(sys.argv[4]).read()
conf = _core.Confinement(ws, [], durability)
print("ready", flush=True)
state = sys.argv[5]
while True:
    _core.apply_patch(conf, forward if state == "A" else back, 1 << 24)
    state = "B" if state == "A" else "A"
    print("committed", flush=True)
"""


def _version(ws: Path) -> str:
    """The one version every file is in; fails on a torn file or a half-applied patch."""
    versions = set()
    for i in range(FILES - 1):
        text = (ws / f"f{i:02}.txt").read_text()
        version = text[:1]
        assert text == _body(version, i), f"f{i:02}.txt is torn"
        versions.add(version)
    present = [v for v in "AB" if (ws / f"{v}-{FILES - 1}.txt").exists()]
    assert len(present) == 1, f"half-applied add/delete: {present}"
    assert (ws / f"{present[0]}-{FILES - 1}.txt").read_text() == _body(present[0], FILES - 1)
    versions.add(present[0])
    assert len(versions) == 1, f"half-applied patch: {versions}"
    return versions.pop()


def _leftovers(ws: Path) -> list[str]:
    return [p.name for p in ws.rglob("*") if "toolroute" in p.name or p.name.endswith(".tmp")]


@pytest.mark.parametrize("durability", ["none", "full"])
def test_sigkill_mid_patch_leaves_all_or_nothing(tmp_path: Path, durability: str) -> None:
    ws = tmp_path / "ws"
    for i in range(FILES - 1):
        write(ws, f"f{i:02}.txt", _body("A", i))
    write(ws, f"A-{FILES - 1}.txt", _body("A", FILES - 1))
    forward, back = tmp_path / "ab.patch", tmp_path / "ba.patch"
    forward.write_text(_patch("A", "B"))
    back.write_text(_patch("B", "A"))
    rng = random.Random(1234)
    seen: set[str] = set()
    kills = KILLS if durability == "none" else KILLS // 4
    for _ in range(kills):
        state = _version(ws)
        args = [sys.executable, "-c", CHILD, str(ws), durability, str(forward), str(back), state, _core.__file__]
        child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        # Half the kills wait for a first commit to end: whatever a commit takes on this machine
        # (a loaded one can take longer than the random delay), kills land both before and after.
        for _ in range(rng.randrange(2)):
            assert child.stdout.readline().strip() == "committed"
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        BuiltInToolContext(ws)  # the next use of the workspace recovers
        seen.add(_version(ws))
        assert _leftovers(ws) == []
    if durability == "none":  # fast commits: the kills landed both before and after some
        assert seen == {"A", "B"}


STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="strace (Debian package strace) places the kills")

# One patch, or (no patch file) only the recovery a new Confinement runs; `-I -S -B`: no site,
# no bytecode written, so the interpreter makes none of the system calls counted below.
CHILD_ONCE = r"""
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.ExtensionFileLoader("toolroute._core", sys.argv[1])
spec = importlib.util.spec_from_file_location("toolroute._core", sys.argv[1], loader=loader)
_core = importlib.util.module_from_spec(spec)
loader.exec_module(_core)
conf = _core.Confinement(sys.argv[2], [], sys.argv[3])
if len(sys.argv) > 4:
    _core.apply_patch(conf, open(sys.argv[4]).read(), 1 << 24)
"""

RENAMES = "rename,renameat,renameat2"


@dataclass(frozen=True)
class Step:
    """Where a commit is killed: on entry to the `nth` of `calls` made by one thread."""

    name: str
    calls: str
    nth: int
    temps: int  # the temps left beside the journal, to show the kill landed there
    version: str  # what recovery leaves: "A" the patch undone, "B" done


def _staging(k: int, name: str) -> Step:
    """Killed while staging the k-th temp (the journal written before). Each temp is an
    `O_TMPFILE` named by `linkat` once written; in the portable build (no `O_TMPFILE`) it is
    created by its name, then written (the first `write` is the journal's)."""
    if _core.PORTABLE:
        return Step(name, "write", k + 1, k, "A")
    return Step(name, "linkat", k, k - 1, "A")


# The patch changes 21 files: 19 updates, the delete of A-19.txt (the 20th change) and the add of
# B-19.txt (the 21st, renamed last). At `full`: the journal, the temps, one wave syncing the
# journal (fdatasync, on the committing thread) with the temps and their folder (fsync, on threads
# of their own), the renames and the delete, the second wave (folders), the journal's removal.
FULL_STEPS = [
    _staging(1, "journal written, no temp staged yet"),
    _staging(10, "half the temps staged"),
    Step("every temp staged, the first wave begins", "fdatasync", 1, 20, "B"),
    Step("during the first wave", "fsync", 1, 20, "B"),
    Step("between the waves, before any rename", RENAMES, 1, 20, "B"),
    Step("between the waves, among the renames", RENAMES, 10, 11, "B"),
    Step("between the waves, before the delete", "unlinkat", 1, 1, "B"),
    Step("between the waves, before the last rename", RENAMES, 20, 1, "B"),
    Step("after the second wave, before the journal goes", "unlinkat", 2, 0, "B"),
]
# At `none` (Linux) a replaced file is exchanged with its new version, then the old one (under the
# temp's name) removed: 19 exchanges each followed by a removal, the delete (removal 20), the add.
NONE_STEPS = [
    _staging(1, "journal written, no temp staged yet"),
    _staging(10, "half the temps staged"),
    Step("every temp staged, before the first exchange", RENAMES, 1, 20, "B"),
    Step("the first file exchanged, its old version not yet removed", "unlinkat", 1, 20, "B"),
    Step("among the exchanges", RENAMES, 10, 11, "B"),
    Step("everything published, before the journal goes", "unlinkat", 21, 0, "B"),
]
if _core.PORTABLE:  # no exchange there: renames, as at `full`
    NONE_STEPS = [*FULL_STEPS[:2], *FULL_STEPS[4:]]


def _killed_at(step: Step, *argv: str) -> None:
    """Run `argv` under strace, killed on entry to the step's call; fails if it was not."""
    assert STRACE is not None
    inject = f"inject={step.calls}:signal=KILL:when={step.nth}"
    command = [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"trace={step.calls}", "-e", inject, *argv]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), (proc.returncode, proc.stderr)


def _staged(ws: Path) -> tuple[int, int]:
    """Journals and temps the killed commit left."""
    names = [p.name for p in ws.rglob(".toolroute-*")]
    return sum(n.endswith(".journal") for n in names), sum(n.endswith(".tmp") for n in names)


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace in version A, and the patch to version B."""
    ws = tmp_path / "ws"
    for i in range(FILES - 1):
        write(ws, f"f{i:02}.txt", _body("A", i))
    write(ws, f"A-{FILES - 1}.txt", _body("A", FILES - 1))
    forward = tmp_path / "ab.patch"
    forward.write_text(_patch("A", "B"))
    return ws, forward


def _child(ws: Path, durability: str, *patch: Path) -> list[str]:
    return [sys.executable, "-I", "-S", "-B", "-c", CHILD_ONCE, _core.__file__, str(ws), durability, *map(str, patch)]


@needs_strace
@pytest.mark.parametrize(
    ("durability", "step"),
    [("full", s) for s in FULL_STEPS] + [("none", s) for s in NONE_STEPS],
    ids=lambda v: v if isinstance(v, str) else v.name.replace(" ", "-"),
)
def test_sigkill_at_each_step_of_a_commit(tmp_path: Path, durability: str, step: Step) -> None:
    ws, forward = _workspace(tmp_path)
    _killed_at(step, *_child(ws, durability, forward))
    assert _staged(ws) == (1, step.temps), "the kill did not land at this step"
    BuiltInToolContext(ws)  # the next use of the workspace recovers
    assert _version(ws) == step.version
    assert _leftovers(ws) == []


@dataclass(frozen=True)
class Interrupted:
    """A commit killed at `commit`, then its recovery killed at `recovery`."""

    name: str
    commit: Step
    recovery: Step
    version: str


RECOVERIES = [
    # Rolling forward: the temps are synced (one wave), renamed, removals redone, folders synced.
    Interrupted("forward, at its sync of the staged temps", FULL_STEPS[3], Step("", "fsync", 1, 0, ""), "B"),
    Interrupted("forward, among its renames", FULL_STEPS[5], Step("", RENAMES, 3, 0, ""), "B"),
    Interrupted("forward, at the delete", FULL_STEPS[5], Step("", "unlinkat", 1, 0, ""), "B"),
    # Rolling back: the temps are removed.
    Interrupted("back, among its removals", FULL_STEPS[1], Step("", "unlinkat", 3, 0, ""), "A"),
]


@needs_strace
@pytest.mark.parametrize("case", RECOVERIES, ids=lambda c: c.name.replace(" ", "-"))
def test_sigkill_during_recovery_is_recovered_again(tmp_path: Path, case: Interrupted) -> None:
    ws, forward = _workspace(tmp_path)
    _killed_at(case.commit, *_child(ws, "full", forward))
    _killed_at(case.recovery, *_child(ws, "full"))
    assert _staged(ws)[0] == 1, "recovery was killed before it removed the journal"
    BuiltInToolContext(ws)
    assert _version(ws) == case.version
    assert _leftovers(ws) == []
