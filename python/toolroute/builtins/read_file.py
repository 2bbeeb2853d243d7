"""read_file: numbered lines of a text file, within the context's limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field

from toolroute._core import read_file_head
from toolroute.builtins._fileio import binary_kind, decode, display_path, split_lines
from toolroute.builtins.base import BuiltinRequest, BuiltinTool, ToolOutput
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError

MAX_LISTING = 200


class ReadFileRequest(BuiltinRequest):
    path: str = Field(description="File to read, relative to the workspace root (or absolute inside it).")
    offset: int | None = Field(
        default=None,
        ge=1,
        description="1-based line to start from (default 1).",
        validation_alias=AliasChoices("offset", "startLine", "start_line"),
    )
    limit: int | None = Field(default=None, ge=1, description="Number of lines to return (default and cap 2000).")
    end_line: int | None = Field(
        default=None,
        ge=1,
        description="Last line to return, inclusive (alternative to limit).",
        validation_alias=AliasChoices("end_line", "endLine"),
    )
    max_chars: int | None = Field(
        default=None,
        ge=1,
        description="Cap on the characters returned (never above the context's output cap).",
        validation_alias=AliasChoices("max_chars", "maxChars"),
    )


def _listing(shown: str, resolved_dir: Path) -> ToolOutput:
    entries = sorted(resolved_dir.iterdir(), key=lambda p: p.name)
    names = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_LISTING]]
    more = len(entries) - len(names)
    text = f"{shown} is a directory ({len(entries)} entries); read_file reads files. Entries:\n" + "\n".join(names)
    if more:
        text += f"\n[… {more} more entries not shown; use glob to search]"
    return ToolOutput(text, {"path": shown, "directory": True, "entries": len(entries), "truncated": more > 0})


def _clip_line(line: str, cap: int) -> str:
    if len(line) <= cap:
        return line
    return f"{line[:cap]}… [line cut: {len(line) - cap} more characters]"


def read_file(request: ReadFileRequest, ctx: BuiltInToolContext) -> ToolOutput:
    limits = ctx.limits
    resolved = ctx.resolve(request.path)
    shown = display_path(ctx, resolved)
    if resolved.is_dir():
        return _listing(shown, resolved)
    _, data, size = read_file_head(ctx.confinement, request.path, limits.max_file_bytes)
    head_only = size > len(data)
    kind = binary_kind(data)
    if kind is not None:
        raise ToolArgumentError(f"{shown} looks like a binary file ({kind}, {size} bytes); read_file returns text only")
    decoded = decode(data, truncated=head_only)
    lines = split_lines(decoded.text)
    total = len(lines)
    start = request.offset or 1
    if total == 0:
        return ToolOutput(f"{shown} is empty (0 lines).", _trace(shown, decoded.encoding, start, 0, 0, 0, False))
    if start > total:
        raise ToolArgumentError(f"offset {start} is past the end of {shown}, which has {total} lines")
    count = min(request.limit or limits.max_read_lines, limits.max_read_lines)
    if request.end_line is not None:
        if request.end_line < start:
            raise ToolArgumentError(f"end_line {request.end_line} is before offset {start}")
        count = min(count, request.end_line - start + 1)
    budget = min(limits.max_output_chars, request.max_chars or limits.max_output_chars)
    out: list[str] = []
    used = 0
    for number in range(start, min(total, start + count - 1) + 1):
        row = f"{number:>6}\t{_clip_line(lines[number - 1], limits.max_line_chars)}"
        if out and used + len(row) + 1 > budget:
            break
        if not out and len(row) > budget:
            row = row[:budget] + "… [cut at the output cap]"
        out.append(row)
        used += len(row) + 1
    last = start + len(out) - 1
    truncated = last < total or head_only
    notes = [f"[note: {decoded.note}]"] if decoded.note else []
    if last < total:
        cause = "the output cap" if len(out) < count else "the line limit"
        notes.append(
            f"[… showing lines {start}-{last} of {total}{'+' if head_only else ''} (cut by {cause}). "
            f"To read on, call read_file with offset={last + 1}.]"
        )
    if head_only:
        notes.append(
            f"[the file is {size} bytes; only the first {len(data)} bytes were read (max_file_bytes); "
            "use grep to find the lines you need]"
        )
    text = "\n".join(out + notes)
    return ToolOutput(text, _trace(shown, decoded.encoding, start, last, len(out), total, truncated))


def _trace(
    shown: str, encoding: str, start: int, end: int, returned: int, total: int, truncated: bool
) -> dict[str, Any]:
    return {
        "path": shown,
        "start_line": start,
        "end_line": end,
        "lines_returned": returned,
        "total_lines": total,
        "truncated": truncated,
        "encoding": encoding,
    }


TOOL = BuiltinTool(
    name="read_file",
    description=(
        "Read a text file from the workspace (or an approved read-only folder). Returns numbered lines "
        "(line number, tab, text). Use offset (1-based) and limit to page through long files; the output "
        "says exactly where to continue. Binary files are refused; a directory gives a short listing."
    ),
    request_model=ReadFileRequest,
    handler=read_file,
    read_only=True,
)
