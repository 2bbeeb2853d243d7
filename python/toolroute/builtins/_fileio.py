"""Helpers shared by the file tools: how paths are shown, and how bytes become text honestly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolroute.context import BuiltInToolContext

# `(codec, label)` of a byte-order mark, as the Rust reader found it (`FilePage.bom`).
Bom = tuple[str, str]


def display_path(ctx: BuiltInToolContext, resolved: Path) -> str:
    """Workspace-relative with `/` when inside the workspace, else the absolute path."""
    try:
        return resolved.relative_to(ctx.workspace).as_posix() or "."
    except ValueError:
        return str(resolved)


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str  # what the bytes were, as told to the model
    note: str = ""  # set when the text is not exactly what is on disk


def decode(data: bytes, *, truncated: bool, bom: Bom | None = None) -> DecodedText:
    """Decode as UTF-8, or in the encoding the file's BOM names (found once, in Rust, which also
    leaves the mark out of `data`); other bytes are shown as Latin-1 and said so."""
    if bom is not None:
        codec, label = bom
        if truncated:  # a cut in the middle of a character is ours, not the file's
            return DecodedText(data.decode(codec, errors="ignore"), label)
        try:
            return DecodedText(data.decode(codec), label)
        except UnicodeDecodeError:
            return DecodedText(data.decode(codec, errors="replace"), label, f"the file is not valid {label}")
    try:
        return DecodedText(data.decode("utf-8"), "UTF-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(data) - 3:
            return DecodedText(data[: exc.start].decode("utf-8"), "UTF-8")
        note = (
            f"the file is not valid UTF-8 (first bad byte at offset {exc.start}); it is shown decoded as "
            "Latin-1 (ISO-8859-1), so non-ASCII characters may be wrong. To change it, use edit with "
            "ASCII-only strings (the other bytes are kept exactly)"
        )
        return DecodedText(data.decode("latin-1"), "not UTF-8 (shown as Latin-1)", note)


def split_lines(text: str) -> list[str]:
    """Lines as the edit and patch tools count them: split on LF only, CR of CRLF dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
