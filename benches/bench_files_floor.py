"""Issue 62: one file at durability `full` against its floor, INTERLEAVED, results checked equal.

The floor is `benches/floor_write.c`, built here with `cc -O2`: write a temp in the file's folder,
fsync it, rename it over the file, fsync the folder, and nothing else (no read, no checks, no
metadata kept), timed inside the program (the pipe that feeds it is outside its time). A second
floor does the same but lets the replaced file go on a second thread while the folder is synced,
as toolroute does (on a disk mounted with `discard`, freeing the old file's blocks costs as much
as an fsync; the plain floor pays it inside the rename). toolroute is timed around
`router.invoke`, Python included. All write to folders side by side on the same disk, the same
bytes each round.

Run: python -m pytest benches/bench_files_floor.py -s
Target: toolroute within 1.15x of the floor (a ratio, floor time / toolroute time, of 0.87 or more).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _interleave import Measured, compare

from toolroute.context import BuiltInToolContext
from toolroute.router import ToolRouter

SOURCE = Path(__file__).with_name("floor_write.c")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "100"))


class Floor:
    """The floor program, running: each `write` replaces its file and returns the seconds it took."""

    def __init__(self, binary: Path, folder: Path, name: str, *, overlap: bool) -> None:
        argv = [str(binary), str(folder), name, *(["overlap"] if overlap else [])]
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def write(self, content: bytes) -> float:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(b"%d\n" % len(content) + content)
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the floor program stopped (exit {self._proc.wait(timeout=5)})")
        return int(answer) / 1e9

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=10)


@pytest.fixture(scope="module")
def floor_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the floor program")
    binary = tmp_path_factory.mktemp("floor") / "floor_write"
    subprocess.run([cc, "-O2", "-pthread", "-o", str(binary), str(SOURCE)], check=True)
    return binary


@pytest.fixture
def sides(floor_binary: Path, tmp_path: Path) -> Iterator[tuple[Path, list[tuple[Path, Floor]]]]:
    """toolroute's folder, and each floor's folder with the floor running in it."""
    ours = tmp_path / "ours"
    ours.mkdir()
    floors = []
    for overlap in (False, True):
        folder = tmp_path / ("floor-overlap" if overlap else "floor")
        folder.mkdir()
        floors.append((folder, Floor(floor_binary, folder, "m.py", overlap=overlap)))
    yield ours, floors
    for _, floor in floors:
        floor.close()


def _module(answer: int) -> str:
    return "".join(f"def f{n}():\n    return {answer if n == 20 else n}\n" for n in range(40))


FLOORS = ("floor (write, fsync, rename, folder fsync; C)", "floor, the old file let go during the folder fsync (C)")


def _run(
    group: str, ours: ToolRouter, tool: str, calls: list[dict[str, str]], floors: list[Floor], contents: list[bytes]
) -> None:
    """Alternate versions A and B on every side (each call replaces the file with new bytes):
    `calls[v]` are toolroute's arguments for version v, `contents[v]` the bytes it leaves."""
    state = {"ours": 0, **{name: 0 for name in FLOORS}}

    def toolroute() -> int:
        version = state["ours"] % 2
        ours.invoke(tool, calls[version])
        state["ours"] += 1
        return version

    def floor_side(name: str, floor: Floor) -> Callable[[], Measured]:
        def run() -> Measured:
            version = state[name] % 2
            seconds = floor.write(contents[version])
            state[name] += 1
            return Measured(seconds, version)

        return run

    alternatives = {name: floor_side(name, floor) for name, floor in zip(FLOORS, floors, strict=True)}
    compare(group, ("toolroute", toolroute), alternatives, ROUNDS)


def _same_everywhere(ours: Path, floors: list[tuple[Path, Floor]]) -> None:
    for folder, _ in floors:
        assert (ours / "m.py").read_bytes() == (folder / "m.py").read_bytes()


def test_write_file_full_vs_floor(sides: tuple[Path, list[tuple[Path, Floor]]]) -> None:
    ours_root, floors = sides
    contents = [_module(21).encode(), _module(20).encode()]
    for root in [ours_root, *(folder for folder, _ in floors)]:
        (root / "m.py").write_bytes(contents[1])
    router = ToolRouter(context=BuiltInToolContext(ours_root, durability="full"))
    calls = [{"path": "m.py", "content": c.decode()} for c in contents]
    _run("write_file 1 file, durability=full", router, "write_file", calls, [f for _, f in floors], contents)
    _same_everywhere(ours_root, floors)


def test_apply_patch_full_vs_floor(sides: tuple[Path, list[tuple[Path, Floor]]]) -> None:
    ours_root, floors = sides
    for root in [ours_root, *(folder for folder, _ in floors)]:
        (root / "m.py").write_text(_module(20))
    router = ToolRouter(context=BuiltInToolContext(ours_root, durability="full"))

    def patch(a: int, b: int) -> str:
        hunk = f"@@ def f20():\n-    return {a}\n+    return {b}\n"
        return f"*** Begin Patch\n*** Update File: m.py\n{hunk}*** End Patch\n"

    calls = [{"patch": patch(20, 21)}, {"patch": patch(21, 20)}]
    contents = [_module(21).encode(), _module(20).encode()]
    _run("apply_patch 1 hunk, durability=full", router, "apply_patch", calls, [f for _, f in floors], contents)
    _same_everywhere(ours_root, floors)
