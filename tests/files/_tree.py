"""A workspace's tree as a value: every folder (mode), file (mode, bytes) and link (target)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

Node = tuple[str, int, bytes]


def tree(root: Path, *, folders: bool = True) -> dict[str, Node]:
    """Every path beneath `root` but `.git` and the file layer's temps, never following a link."""
    out: dict[str, Node] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" and not d.startswith(".toolroute-")]
        base = Path(folder)
        for name in [*dirs, *files]:
            if name.startswith(".toolroute-"):
                continue
            path = base / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(st.st_mode):
                if folders:
                    out[rel] = ("dir", stat.S_IMODE(st.st_mode), b"")
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return out


def leftovers(root: Path) -> list[str]:
    """The file layer's temps and journals left anywhere beneath `root`."""
    return [str(p) for p in root.rglob(".toolroute-*")]
