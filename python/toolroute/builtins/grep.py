"""grep: regex search over file contents (spec 6), in Rust on ripgrep's crates."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field

from toolroute._core import CancelFlag, GrepProgress, GrepResult
from toolroute._core import grep as core_grep
from toolroute.builtins._search import (
    as_list,
    assemble,
    body_budget,
    cancellable,
    paging_footer,
    skip_notice,
    split_globs,
)
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.progress import current_progress, ticking
from toolroute.types import ToolOutput

OutputMode = Literal["content", "files_with_matches", "count"]


class GrepRequest(BuiltinRequest):
    pattern: str = Field(description="Rust regex syntax (or a literal string with fixed_strings).", min_length=1)
    path: str | None = Field(None, description="Folder or file to search; default the workspace root.")
    glob: str | list[str] | None = Field(
        None,
        validation_alias=AliasChoices("glob", "include"),
        description="rg --glob filters, e.g. '*.py' or '!tests/**'; several separated by spaces or commas. "
        "Matched against the path relative to the workspace root (as rg -g run there); a glob without '/' "
        "matches file names at any depth. A file a glob selects is searched whatever `type` says.",
    )
    file_type: str | list[str] | None = Field(
        None,
        validation_alias=AliasChoices("type", "file_type"),
        description="ripgrep file types (py, rust, js, ...); '!name' excludes a type.",
    )
    case_insensitive: bool = Field(False, validation_alias=AliasChoices("case_insensitive", "caseInsensitive", "-i"))
    fixed_strings: bool = Field(False, description="Treat pattern as a literal string.")
    word: bool = Field(False, description="Match whole words only.")
    multiline: bool = Field(False, description="Let the pattern span lines; '.' then matches a newline.")
    context: int | None = Field(None, ge=0, validation_alias=AliasChoices("context", "-C"))
    before: int | None = Field(None, ge=0, validation_alias=AliasChoices("before", "-B"))
    after: int | None = Field(None, ge=0, validation_alias=AliasChoices("after", "-A"))
    output_mode: OutputMode = Field(
        "content", description="content (path:line:text), files_with_matches, or count (path:matching lines)."
    )
    max_count: int | None = Field(None, ge=1, description="Stop after this many matches in each file.")
    head_limit: int | None = Field(
        None,
        ge=0,
        validation_alias=AliasChoices("head_limit", "maxResults", "limit"),
        description="Return at most this many result lines (0 = no limit besides the output cap).",
    )
    offset: int = Field(0, ge=0, description="Skip this many result lines (for paging).")
    hidden: bool = Field(False, description="Search hidden (dot) files and directories too.")
    no_ignore: bool = Field(False, description="Do not apply .gitignore/.ignore/git exclude rules.")
    text: bool = Field(False, description="Search binary files as if they were text.")
    follow_symlinks: bool = Field(False, description="Follow symlinks (only those resolving inside the roots).")

    # What the Rust search reads besides the fields above (`GrepCall` in rust/binding/src/search.rs):
    # the values after aliases and shorthands are applied.
    @property
    def globs(self) -> list[str]:
        return split_globs(self.glob)

    @property
    def types(self) -> list[str]:
        return as_list(self.file_type)

    @property
    def before_lines(self) -> int:
        return self.before if self.before is not None else self.context or 0

    @property
    def after_lines(self) -> int:
        return self.after if self.after is not None else self.context or 0


def run_grep(request: GrepRequest, ctx: BuiltInToolContext) -> GrepResult:
    """The structured search (a `toolroute._core.GrepResult`), for Python callers and the tool."""
    # The request is read in Rust, field by field; a line is read up to 4 bytes per character.
    max_line_bytes = ctx.limits.max_line_chars * 4
    # A served client that asked hears how far a long search has got (the search runs without
    # the GIL, so the reporting thread can read its count); files are counted only then.
    sink = current_progress()
    searched = GrepProgress() if sink is not None else None

    def figure() -> tuple[float, str]:
        files = searched.files if searched is not None else 0  # read once: the search goes on
        return files, f"searched {files} files"

    def search(cancel: CancelFlag | None) -> GrepResult:
        return core_grep(ctx.confinement, request, max_line_bytes=max_line_bytes, progress=searched, cancel=cancel)

    return ticking(sink, figure, lambda: cancellable(search, "grep"))


def _summary(result: GrepResult) -> str:
    files = result.files_matched
    lines = result.match_lines
    noun = "file" if files == 1 else "files"
    if result.output_mode == "files_with_matches":
        return f"Found {files} {noun} with matches."
    return f"Found {lines} matching line{'s' if lines != 1 else ''} in {files} {noun}."


def grep_handler(request: GrepRequest, ctx: BuiltInToolContext) -> ToolOutput:
    result = run_grep(request, ctx)
    stats = result.stats
    notice = skip_notice(stats)
    where = request.path or "."
    limit = request.head_limit or None
    total = result.total
    max_chars = ctx.limits.max_output_chars
    body: str = ""
    rows: list[dict[str, Any]] = []
    if total == 0:
        header = f"No matches for {request.pattern!r} in {where}."
    elif request.offset >= total:
        header = f"No results at offset {request.offset}: the search has {total} result lines."
    else:
        header = _summary(result)
        budget = body_budget(max_chars, header, notice)
        body, rows = result.render(request.offset, limit, budget, ctx.limits.max_line_chars)
    shown = len(rows)
    footer = paging_footer(request.offset, shown, total, "grep") if shown else ""
    trace = {
        "tool": "grep",
        "pattern": request.pattern,
        "path": where,
        "output_mode": request.output_mode,
        "total": total,
        "files_matched": result.files_matched,
        "match_lines": result.match_lines,
        "offset": request.offset,
        "shown": shown,
        "results": rows,
        "skipped": stats,
    }
    return ToolOutput(assemble([header, body, footer, notice], max_chars), trace)


TOOL = BuiltinTool(
    name="grep",
    description=(
        "Search file contents with a regular expression (ripgrep engine, Rust regex syntax). Respects "
        ".gitignore/.ignore (a nested repository is not covered by its parent's .gitignore) and skips hidden "
        "and binary files unless told otherwise; glob and type never bring back ignored or hidden files. "
        "`glob` is relative to the workspace root and a matching glob wins over `type`. Results are sorted "
        "by path and paged with head_limit/offset."
    ),
    request_model=GrepRequest,
    handler=grep_handler,
    read_only=True,
)
