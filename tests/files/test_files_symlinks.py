"""Symlinks are objects: apply_patch's delete and move act on the link itself (as git does), never
on its target; writes through a link land on its target only when that is inside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _files_helpers import patch, router_for, tree_hash, write

from toolroute.errors import ToolArgumentError


def test_delete_removes_the_link_not_its_target(tmp_path: Path) -> None:
    write(tmp_path, "real.txt", "real\n")
    os.symlink("real.txt", tmp_path / "link")
    out = router_for(tmp_path).invoke("apply_patch", {"patch": patch("*** Delete File: link")})
    assert "D link" in out
    assert not os.path.lexists(tmp_path / "link")
    assert (tmp_path / "real.txt").read_text() == "real\n"


def test_delete_of_a_link_to_outside_only_removes_the_link(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "keep.txt", "k\n")
    write(tmp_path, "outside.txt", "secret\n")
    os.symlink(tmp_path / "outside.txt", ws / "link")
    router_for(ws).invoke("apply_patch", {"patch": patch("*** Delete File: link")})
    assert not os.path.lexists(ws / "link")
    assert (tmp_path / "outside.txt").read_text() == "secret\n"


def test_move_of_a_link_moves_the_name_and_keeps_the_target(tmp_path: Path) -> None:
    write(tmp_path, "real.txt", "a\n")
    os.symlink("real.txt", tmp_path / "link")
    router_for(tmp_path).invoke(
        "apply_patch", {"patch": patch("*** Update File: link", "*** Move to: moved.txt", "@@", "-a", "+b")}
    )
    assert not os.path.lexists(tmp_path / "link")
    assert (tmp_path / "real.txt").read_text() == "a\n"
    assert (tmp_path / "moved.txt").read_text() == "b\n" and not (tmp_path / "moved.txt").is_symlink()


def test_failed_patch_restores_a_deleted_link(tmp_path: Path) -> None:
    write(tmp_path, "real.txt", "a\n")
    os.symlink("real.txt", tmp_path / "link")
    before = tree_hash(tmp_path)
    bad = patch("*** Delete File: link", "*** Update File: real.txt", "@@", "-missing", "+x")
    with pytest.raises(ToolArgumentError, match="missing"):
        router_for(tmp_path).invoke("apply_patch", {"patch": bad})
    assert tree_hash(tmp_path) == before and os.path.islink(tmp_path / "link")
