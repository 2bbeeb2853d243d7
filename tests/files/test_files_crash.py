"""SIGKILL during multi-file patches: after recovery no file is torn, no patch is half-applied and
no temp file is left. A child process applies a 20-file patch back and forth until it is killed
at a random moment; a new context on the workspace (which runs recovery) must then see every file
of the patch in the same version. Bounded: a fixed number of kills, each child at most seconds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
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
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        BuiltInToolContext(ws)  # the next use of the workspace recovers
        seen.add(_version(ws))
        assert _leftovers(ws) == []
    if durability == "none":  # fast commits: the kills landed both before and after some
        assert seen == {"A", "B"}
