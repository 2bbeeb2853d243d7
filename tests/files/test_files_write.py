"""write_file through router.invoke: modes, atomicity, permissions, style kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _files_helpers import router_for, tree_hash, write

from toolroute.context import ToolLimits
from toolroute.errors import PathDeniedError, ToolArgumentError


def test_create_overwrite_append(tmp_path: Path) -> None:
    r = router_for(tmp_path)
    out = r.execute("write_file", {"path": "deep/er/f.txt", "content": "a\n", "mode": "create"})
    assert out.text == "Created deep/er/f.txt (2 bytes)."
    assert out.trace == {"path": "deep/er/f.txt", "mode": "create", "created": True, "bytes_written": 2}
    assert r.invoke("write_file", {"path": "deep/er/f.txt", "content": "b\n"}) == "Overwrote deep/er/f.txt (2 bytes)."
    assert r.invoke("write_file", {"path": "deep/er/f.txt", "content": "c\n", "mode": "APPEND"}) == (
        "Appended 2 bytes to deep/er/f.txt (now 4 bytes)."
    )
    assert (tmp_path / "deep/er/f.txt").read_bytes() == b"b\nc\n"


def test_create_never_overwrites(tmp_path: Path) -> None:
    write(tmp_path, "f.txt", "keep")
    with pytest.raises(ToolArgumentError, match="already exists"):
        router_for(tmp_path).invoke("write_file", {"path": "f.txt", "content": "x", "mode": "create"})
    assert (tmp_path / "f.txt").read_bytes() == b"keep"


def test_atomic_replace_keeps_permissions_and_leaves_no_temp(tmp_path: Path) -> None:
    f = write(tmp_path, "run.sh", "echo 1\n")
    f.chmod(0o750)
    inode = f.stat().st_ino
    router_for(tmp_path).invoke("write_file", {"path": "run.sh", "content": "echo 2\n"})
    assert f.read_bytes() == b"echo 2\n"
    assert f.stat().st_mode & 0o777 == 0o750
    assert f.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


def test_new_file_mode_follows_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        router_for(tmp_path).invoke("write_file", {"path": "n.txt", "content": "x"})
    finally:
        os.umask(old)
    assert (tmp_path / "n.txt").stat().st_mode & 0o777 == 0o640


def test_overwrite_keeps_crlf_and_bom(tmp_path: Path) -> None:
    f = write(tmp_path, "win.txt", b"\xef\xbb\xbfa\r\nb\r\n")
    r = router_for(tmp_path)
    r.invoke("write_file", {"path": "win.txt", "content": "x\ny\n"})
    assert f.read_bytes() == b"\xef\xbb\xbfx\r\ny\r\n"
    r.invoke("write_file", {"path": "win.txt", "content": "z\n", "mode": "append"})
    assert f.read_bytes() == b"\xef\xbb\xbfx\r\ny\r\nz\r\n"


def test_refusals_leave_tree_unchanged(tmp_path: Path) -> None:
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    write(ws, "d/keep.txt", "k")
    write(ro, "r.txt", "r")
    r = router_for(ws, read_only=(ro,), limits=ToolLimits(max_write_bytes=10))
    before = tree_hash(tmp_path)
    with pytest.raises(ToolArgumentError, match="directory"):
        r.invoke("write_file", {"path": "d", "content": "x"})
    with pytest.raises(ToolArgumentError, match="over the 10-byte limit"):
        r.invoke("write_file", {"path": "big.txt", "content": "x" * 11})
    with pytest.raises(ToolArgumentError, match="mode"):
        r.invoke("write_file", {"path": "m.txt", "content": "x", "mode": "truncate"})
    with pytest.raises(PathDeniedError, match="read-only"):
        r.invoke("write_file", {"path": str(ro / "r.txt"), "content": "x"})
    with pytest.raises(PathDeniedError, match="outside the allowed roots"):
        r.invoke("write_file", {"path": "../escape.txt", "content": "x"})
    assert tree_hash(tmp_path) == before
