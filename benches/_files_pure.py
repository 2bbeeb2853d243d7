"""The same matching as toolroute's Rust core, written the obvious way in pure Python.

This is the baseline the file benchmarks compare against: Codex's `seek_sequence` (four tiers:
exact, trailing whitespace, surrounding whitespace, Unicode punctuation) over `str.split` lines,
chunks applied in order, and an exact-string edit with line numbers and a whitespace-tolerant
near-match search on a miss.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PUNCT = str.maketrans(
    {
        **{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"},
        **{c: "'" for c in "\u2018\u2019\u201a\u201b"},
        **{c: '"' for c in "\u201c\u201d\u201e\u201f"},
        **{c: " " for c in "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"},
    }
)


def seek_sequence(lines: list[str], pattern: list[str], start: int, eof: bool) -> int | None:
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    begin = len(lines) - len(pattern) if eof else start
    end = len(lines) - len(pattern) + 1
    for i in range(begin, end):
        if lines[i : i + len(pattern)] == pattern:
            return i
    for i in range(begin, end):
        if all(lines[i + j].rstrip() == p.rstrip() for j, p in enumerate(pattern)):
            return i
    for i in range(begin, end):
        if all(lines[i + j].strip() == p.strip() for j, p in enumerate(pattern)):
            return i
    for i in range(begin, end):
        if all(lines[i + j].strip().translate(_PUNCT) == p.strip().translate(_PUNCT) for j, p in enumerate(pattern)):
            return i
    return None


def parse_update(patch: str) -> list[tuple[list[str], list[str], list[str], bool]]:
    """Chunks of a one-file update patch: (anchors, old lines, new lines, end_of_file)."""
    chunks: list[tuple[list[str], list[str], list[str], bool]] = []
    lines = patch.strip().splitlines()[2:-1]  # drop Begin Patch / Update File / End Patch
    for line in lines:
        if line.startswith("@@"):
            chunks.append(([line[3:]] if len(line) > 3 else [], [], [], False))
            continue
        anchors, old, new, _ = chunks[-1]
        if line == "*** End of File":
            chunks[-1] = (anchors, old, new, True)
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        else:
            old.append(line[1:])
            new.append(line[1:])
    return chunks


def apply_update(content: str, patch: str) -> str:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    replacements: list[tuple[int, int, list[str]]] = []
    index = 0
    for anchors, old, new, eof in parse_update(patch):
        for anchor in anchors:
            found = seek_sequence(lines, [anchor], index, False)
            if found is None:
                raise ValueError(f"context {anchor!r} not found")
            index = found + 1
        at = seek_sequence(lines, old, index, eof)
        if at is None:
            raise ValueError("expected lines not found:\n" + "\n".join(old))
        replacements.append((at, len(old), new))
        index = at + len(old)
    for at, n, new in reversed(replacements):
        lines[at : at + n] = new
    return "\n".join(lines) + "\n"


def edit_text(content: bytes, old: str, new: str, replace_all: bool) -> tuple[bytes, int, list[int]]:
    text = content.decode("utf-8")
    count = text.count(old)
    if count == 0:
        lines = text.split("\n")
        near = seek_sequence(lines, old.split("\n"), 0, False)
        raise ValueError(f"old_string not found; nearest match at line {None if near is None else near + 1}")
    if count > 1 and not replace_all:
        raise ValueError(f"old_string is not unique ({count} occurrences)")
    starts: list[int] = []
    line, last = 1, 0
    pos = text.find(old)
    while pos != -1:
        line += text.count("\n", last, pos)
        starts.append(line)
        last = pos
        pos = text.find(old, pos + len(old))
    return text.replace(old, new).encode("utf-8"), count, starts


def atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".pure-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


def apply_update_file(path: Path, patch: str) -> None:
    atomic_write(path, apply_update(path.read_text(encoding="utf-8"), patch).encode("utf-8"))


def edit_file(path: Path, old: str, new: str, replace_all: bool) -> None:
    atomic_write(path, edit_text(path.read_bytes(), old, new, replace_all)[0])
