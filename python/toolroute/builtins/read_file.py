"""read_file: numbered lines of a text file, within the context's limits."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field

from toolroute._core import DirListing, FilePage, read_file_head, read_page
from toolroute.builtins._fileio import DecodedText, decode, display_path, split_lines
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.builtins.media import image_output, media_kind, pdf_output
from toolroute.context import BuiltInToolContext, ToolLimits
from toolroute.errors import ToolArgumentError, ToolPreconditionError
from toolroute.outputcap import cap_text
from toolroute.types import ToolOutput

MAX_LISTING = 200


class ReadFileRequest(BuiltinRequest):
    path: str = Field(description="File to read, relative to the workspace root (or absolute inside it).")
    offset: int | None = Field(
        default=None,
        ge=1,
        description="1-based line to start from (default 1).",
        validation_alias=AliasChoices("offset", "startLine", "start_line"),
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"Number of lines to return (default and cap {ToolLimits().max_read_lines}, unless the host sets "
        "another).",
    )
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
    pages: str | None = Field(
        default=None,
        description="PDF only: the pages to read, such as '3', '1-5' or '2,4-6' (default: from the first, "
        f"{ToolLimits().max_pdf_pages} at most).",
    )
    page_images: bool = Field(default=False, description="PDF only: each page as an image too, after its text.")


def _listing(shown: str, names: list[str]) -> ToolOutput:
    shown_names = names[:MAX_LISTING]
    more = len(names) - len(shown_names)
    text = f"{shown} is a directory ({len(names)} entries); read_file reads files. Entries:\n" + "\n".join(shown_names)
    if more:
        text += f"\n[… {more} more entries not shown; use glob to search]"
    return ToolOutput(text, {"path": shown, "directory": True, "entries": len(names), "truncated": more > 0})


def _clip_line(line: str, cap: int) -> str:
    if len(line) <= cap:
        return line
    return f"{line[:cap]}… [line cut: {len(line) - cap} more characters]"


def _page_lines(page: FilePage, start: int, count: int) -> tuple[DecodedText, list[str], int | None]:
    """The decoded lines of the page, and the file's line count when known."""
    if page.whole:  # UTF-16/32: decoded whole, then paged
        decoded = decode(page.body, truncated=page.capped, bom=page.bom)
        lines = split_lines(decoded.text)
        return decoded, lines[start - 1 : start - 1 + count], len(lines)
    decoded = decode(page.body, truncated=page.capped, bom=page.bom)
    return decoded, split_lines(decoded.text)[:count], page.total


def read_file(request: ReadFileRequest, ctx: BuiltInToolContext) -> ToolOutput:
    limits = ctx.limits
    start = request.offset or 1
    count = min(request.limit or limits.max_read_lines, limits.max_read_lines)
    if request.end_line is not None:
        if request.end_line < start:
            raise ToolArgumentError(f"end_line {request.end_line} is before offset {start}")
        count = min(count, request.end_line - start + 1)
    # One crossing: open beneath the roots, list or read only the lines this page needs.
    got = read_page(ctx.confinement, request.path, start, count, limits.max_file_bytes)
    shown = display_path(ctx, got.resolved)
    if isinstance(got, DirListing):
        return _listing(shown, got.names)
    kind = got.binary
    media = media_kind(kind, shown) if kind is not None else None
    if media is None and (request.pages is not None or request.page_images):
        raise ToolArgumentError(f"pages and page_images are for PDFs; {shown} is not one")
    if media is not None:
        return _media(request, ctx, shown, media)
    if kind is not None:
        raise ToolArgumentError(
            f"{shown} looks like a binary file ({kind}, {got.size} bytes); read_file returns text, images "
            "(PNG, JPEG, GIF, WebP) and PDFs"
        )
    decoded, lines, total = _page_lines(got, start, count)
    if total == 0:
        return ToolOutput(f"{shown} is empty (0 lines).", _trace(shown, decoded.encoding, start, 0, 0, 0, False))
    if not lines:
        if total is not None:
            raise ToolArgumentError(f"offset {start} is past the end of {shown}, which has {total} lines")
        raise ToolArgumentError(
            f"offset {start} is past the first {got.scanned} bytes of {shown}, the most read_file reads "
            "(max_file_bytes); use grep to find the lines you need"
        )
    cap = min(limits.max_output_chars, request.max_chars or limits.max_output_chars)
    out: list[str] = []
    used = 0
    for number, line in enumerate(lines, start):
        row = f"{number:>6}\t{_clip_line(line, limits.max_line_chars)}"
        if out and used + len(row) + 1 > cap:
            break
        if not out and len(row) > cap:
            row = cap_text(row, cap)
        out.append(row)
        used += len(row) + 1

    def notes_after(shown: int) -> list[str]:
        last = start + shown - 1
        notes = [f"[note: {decoded.note}]"] if decoded.note else []
        if total is None or last < total:
            cause = "the output cap" if shown < len(lines) or shown < count else "the line limit"
            of = f"{total}{'+' if got.capped else ''}" if total is not None else f"a {got.size}-byte file"
            notes.append(
                f"[… showing lines {start}-{last} of {of} (cut by {cause}). "
                f"To read on, call read_file with offset={last + 1}.]"
            )
        if got.capped:
            notes.append(
                f"[the file is {got.size} bytes; only the first {got.scanned} bytes were read (max_file_bytes); "
                "use grep to find the lines you need]"
            )
        return notes

    # The notes count against the cap too: rows give way to them, down to one row; what still
    # does not fit (a tiny max_chars) is cut with the one notice.
    notes = notes_after(len(out))
    while len(out) > 1 and used + sum(len(n) + 1 for n in notes) > cap:
        used -= len(out.pop()) + 1
        notes = notes_after(len(out))
    last = start + len(out) - 1
    more_after = total is None or last < total
    text = cap_text("\n".join(out + notes), cap)
    truncated = more_after or got.capped
    return ToolOutput(text, _trace(shown, decoded.encoding, start, last, len(out), total, truncated))


def _media(request: ReadFileRequest, ctx: BuiltInToolContext, shown: str, media: str) -> ToolOutput:
    """An image or a PDF, its bytes read as a text file's are (confined, by descriptor, within
    max_file_bytes)."""
    limits = ctx.limits
    _, data, size = read_file_head(ctx.confinement, request.path, limits.max_file_bytes)
    if size > len(data):
        raise ToolPreconditionError(
            f"{shown} is {size} bytes, over the {limits.max_file_bytes} read_file reads (max_file_bytes)"
        )
    if media == "pdf":
        cap = min(limits.max_output_chars, request.max_chars or limits.max_output_chars)
        return pdf_output(data, shown, request.pages, request.page_images, cap, limits)
    if request.pages is not None or request.page_images:
        raise ToolArgumentError(f"pages and page_images are for PDFs; {shown} is an image")
    return image_output(data, shown, limits)


def _trace(
    shown: str, encoding: str, start: int, end: int, returned: int, total: int | None, truncated: bool
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
        "Read a file from the workspace (or an approved read-only folder). A text file comes back as numbered "
        "lines (line number, tab, text): use offset (1-based) and limit to page through long files; the output "
        "says exactly where to continue. An image (PNG, JPEG, GIF, WebP) comes back as the image; a PDF as its "
        "text page by page (pages chooses them; page_images adds each page as an image). Other binary files "
        "are refused; a directory gives a short listing."
    ),
    request_model=ReadFileRequest,
    handler=read_file,
    read_only=True,
)
