"""Shared helpers for the file-tool tests: a router bound to a temp workspace, tree snapshots."""

from __future__ import annotations

import hashlib
from pathlib import Path

from toolroute.context import BuiltInToolContext, ToolLimits
from toolroute.router import ToolRouter


def router_for(root: Path, *, read_only: tuple[Path, ...] = (), limits: ToolLimits | None = None) -> ToolRouter:
    return ToolRouter(context=BuiltInToolContext(root, read_only_roots=read_only, limits=limits))


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (exact bytes) and folder (None) under root, by relative path."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = b"symlink->" + str(p.readlink()).encode()
        elif p.is_dir():
            out[rel + "/"] = None
        else:
            out[rel] = p.read_bytes()
    return out


def tree_hash(root: Path) -> str:
    """One digest over every path, its bytes and its mode: equal means nothing changed."""
    digest = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        digest.update(p.relative_to(root).as_posix().encode() + b"\0")
        st = p.lstat()
        digest.update(str(st.st_mode).encode())
        if p.is_file() and not p.is_symlink():
            digest.update(p.read_bytes())
    return digest.hexdigest()


def write(root: Path, rel: str, data: bytes | str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def patch(*sections: str) -> str:
    return "*** Begin Patch\n" + "\n".join(sections) + "\n*** End Patch\n"
