"""What a rewrite keeps: owner, group and mode; hard links (refused, not split); read-only files
(refused unless asked); the file's encoding and line endings on append; and a read-only root
around the workspace, reported as exactly that."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from _files_helpers import patch, router_for, write

from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _rewrites(path: str, patched: str = "uno") -> list[tuple[str, dict[str, Any]]]:
    """Each file tool's rewrite; the patch swaps `patched` (what the edit left) and `one`."""
    return [
        ("write_file", {"path": path, "content": "one\nthree\n"}),
        ("write_file", {"path": path, "content": "four\n", "mode": "append"}),
        ("edit", {"path": path, "old_string": "one", "new_string": "uno"}),
        (
            "apply_patch",
            {"patch": patch(f"*** Update File: {path}", "@@", f"-{patched}", "+one" if patched != "one" else "+uno")},
        ),
    ]


@as_root
def test_owner_group_and_mode_survive_every_rewrite(tmp_path: Path) -> None:
    f = write(tmp_path, "owned.txt", "one\ntwo\n")
    os.chown(f, 1234, 5678)
    os.chmod(f, 0o640)
    r = router_for(tmp_path)
    for name, args in _rewrites("owned.txt"):
        r.invoke(name, args)
        st = f.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o640), name
    assert f.read_text() == "one\nthree\nfour\n"


@as_root
def test_moved_file_keeps_its_owner_and_mode(tmp_path: Path) -> None:
    f = write(tmp_path, "a.sh", "echo a\n")
    os.chown(f, 1234, 5678)
    os.chmod(f, 0o750)
    router_for(tmp_path).invoke(
        "apply_patch", {"patch": patch("*** Update File: a.sh", "*** Move to: bin/b.sh", "@@", "-echo a", "+echo b")}
    )
    st = (tmp_path / "bin/b.sh").stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o750)


def test_hard_linked_file_is_refused_not_split(tmp_path: Path) -> None:
    f = write(tmp_path, "a.txt", "one\n")
    os.link(f, tmp_path / "b.txt")
    r = router_for(tmp_path)
    for name, args in _rewrites("a.txt", patched="one"):
        with pytest.raises(ToolArgumentError, match="2 hard links"):
            r.invoke(name, args)
    assert f.read_text() == "one\n" and os.path.samefile(f, tmp_path / "b.txt")


def test_read_only_file_needs_the_explicit_option(tmp_path: Path) -> None:
    f = write(tmp_path, "ro.txt", "one\n")
    os.chmod(f, 0o444)
    r = router_for(tmp_path)
    for name, args in _rewrites("ro.txt", patched="one"):
        with pytest.raises(ToolArgumentError, match="read-only"):
            r.invoke(name, args)
    with pytest.raises(ToolArgumentError, match="read-only"):
        r.invoke("apply_patch", {"patch": patch("*** Delete File: ro.txt")})
    assert f.read_text() == "one\n"
    r.invoke("edit", {"path": "ro.txt", "old_string": "one", "new_string": "uno", "write_read_only": True})
    assert f.read_text() == "uno\n" and stat.S_IMODE(f.stat().st_mode) == 0o444


def test_append_keeps_utf16_and_crlf(tmp_path: Path) -> None:
    f = write(tmp_path, "u16.txt", "\ufeffhé\r\n".encode("utf-16-le"))
    router_for(tmp_path).invoke("write_file", {"path": "u16.txt", "content": "wörld\n", "mode": "append"})
    assert f.read_bytes().decode("utf-16") == "hé\r\nwörld\r\n"


def test_latin1_append_kept_or_refused(tmp_path: Path) -> None:
    f = write(tmp_path, "l1.txt", "café\n".encode("latin-1"))
    r = router_for(tmp_path)
    r.invoke("write_file", {"path": "l1.txt", "content": "thé\n", "mode": "append"})
    assert f.read_bytes() == "café\nthé\n".encode("latin-1")
    with pytest.raises(ToolArgumentError, match="Latin-1"):
        r.invoke("write_file", {"path": "l1.txt", "content": "€\n", "mode": "append"})
    assert f.read_bytes() == "café\nthé\n".encode("latin-1")


def test_read_only_root_around_the_workspace_is_reported(tmp_path: Path) -> None:
    ws = tmp_path / "home" / "proj"
    ws.mkdir(parents=True)
    with pytest.raises(ValueError, match="contains the workspace root"):
        BuiltInToolContext(ws, read_only_roots=[tmp_path / "home"])


def test_durability_levels_are_checked(tmp_path: Path) -> None:
    for level in ("none", "file", "full"):
        ctx = BuiltInToolContext(tmp_path, durability=level)  # type: ignore[arg-type]
        assert ctx.confinement.durability == level
    with pytest.raises(ValueError, match="durability"):
        BuiltInToolContext(tmp_path, durability="fast")  # type: ignore[arg-type]
