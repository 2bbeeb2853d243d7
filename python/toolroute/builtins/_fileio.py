"""Helpers shared by the file tools: how paths are shown, and how bytes become text honestly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolroute.context import BuiltInToolContext

# Magic numbers of common binary formats, so the refusal can say what the file is.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (also .jar/.docx/.xlsx)"),
    (b"\x7fELF", "ELF executable"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"SQLite format 3\x00", "SQLite database"),
)
_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8", "UTF-8 with BOM"),
    (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32LE (BOM)"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32BE (BOM)"),
    (b"\xff\xfe", "utf-16-le", "UTF-16LE (BOM)"),
    (b"\xfe\xff", "utf-16-be", "UTF-16BE (BOM)"),
)
_SNIFF_BYTES = 8192


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


def binary_kind(data: bytes) -> str | None:
    """Why `data` is not text (None if it looks like text). UTF-16/32 with a BOM is text."""
    if any(data.startswith(bom) for bom, _, _ in _BOMS):
        return None
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if b"\x00" in data[:_SNIFF_BYTES]:
        return "binary data (NUL bytes)"
    return None


def decode(data: bytes, *, truncated: bool) -> DecodedText:
    """Decode as UTF-8 (BOM-aware, UTF-16/32 by BOM); other bytes are shown as Latin-1 and said so."""
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            body = data[len(bom) :]
            if truncated:  # a cut in the middle of a character is ours, not the file's
                return DecodedText(body.decode(codec, errors="ignore"), label)
            try:
                return DecodedText(body.decode(codec), label)
            except UnicodeDecodeError:
                return DecodedText(body.decode(codec, errors="replace"), label, f"the file is not valid {label}")
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
