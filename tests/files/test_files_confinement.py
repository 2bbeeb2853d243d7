"""Every file tool refuses paths that escape the roots: `..`, absolute, symlinks, read-only roots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _files_helpers import patch, router_for, tree_hash, write

from toolroute._core import read_file_head
from toolroute.context import BuiltInToolContext
from toolroute.errors import PathDeniedError


def _calls(target: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": target}),
        ("write_file", {"path": target, "content": "pwned"}),
        ("edit", {"path": target, "old_string": "secret", "new_string": "pwned"}),
        ("apply_patch", {"patch": patch(f"*** Update File: {target}", "-secret", "+pwned")}),
        ("apply_patch", {"patch": patch(f"*** Add File: {target}", "+pwned")}),
        ("apply_patch", {"patch": patch(f"*** Delete File: {target}")}),
    ]


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    write(ws, "inside.txt", "secret\n")
    write(tmp_path, "outside.txt", "secret\n")
    write(tmp_path, "outdir/o.txt", "secret\n")
    os.symlink(tmp_path / "outside.txt", ws / "link.txt")
    os.symlink(tmp_path / "outdir", ws / "dirlink")
    return tmp_path, ws


@pytest.mark.parametrize(
    "target", ["../outside.txt", "sub/../../outside.txt", "link.txt", "dirlink/o.txt", "dirlink/new.txt", "ABS"]
)
def test_escapes_refused_by_every_tool(layout: tuple[Path, Path], target: str) -> None:
    base, ws = layout
    if target == "ABS":
        target = str(base / "outside.txt")
    r = router_for(ws)
    before = tree_hash(base)
    for name, args in _calls(target):
        if target == "link.txt" and "Delete File" in str(args):
            continue  # deleting a link acts on the link itself: see test_files_symlinks.py
        with pytest.raises(PathDeniedError, match="outside the allowed roots"):
            r.invoke(name, args)
    assert tree_hash(base) == before


def test_message_names_path_and_roots(layout: tuple[Path, Path]) -> None:
    _, ws = layout
    with pytest.raises(PathDeniedError) as err:
        router_for(ws).invoke("read_file", {"path": "link.txt"})
    assert '"link.txt"' in str(err.value) and str(ws.resolve()) in str(err.value)


def test_read_only_root_refuses_every_write(tmp_path: Path) -> None:
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    ws.mkdir()
    write(ro, "r.txt", "secret\n")
    os.symlink(ro, ws / "rolink")
    r = router_for(ws, read_only=(ro,))
    before = tree_hash(tmp_path)
    for target in (str(ro / "r.txt"), "rolink/r.txt"):
        assert r.invoke("read_file", {"path": target}) == "     1\tsecret"
        for name, args in _calls(target)[1:]:
            with pytest.raises(PathDeniedError, match="read-only"):
                r.invoke(name, args)
    assert tree_hash(tmp_path) == before


def test_inside_symlinks_still_work(layout: tuple[Path, Path]) -> None:
    _, ws = layout
    os.symlink(ws / "inside.txt", ws / "alias.txt")
    r = router_for(ws)
    r.invoke("edit", {"path": "alias.txt", "old_string": "secret", "new_string": "public"})
    assert (ws / "inside.txt").read_bytes() == b"public\n"
    assert (ws / "alias.txt").is_symlink()  # the link was followed, not replaced


def test_symlink_swapped_after_the_check_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "file.txt", "ok\n")
    write(tmp_path, "secret.txt", "secret\n")
    ctx = BuiltInToolContext(ws)
    ctx.resolve("file.txt")  # the tool's check passes...
    (ws / "file.txt").unlink()
    os.symlink(tmp_path / "secret.txt", ws / "file.txt")  # ...then the path is swapped
    with pytest.raises(PathDeniedError):
        read_file_head(ctx.confinement, "file.txt", 100)
