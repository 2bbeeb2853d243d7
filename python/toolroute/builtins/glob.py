"""glob: list files matching a gitignore-style glob (spec 6), on the same walker as grep."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from toolroute._core import GlobResult
from toolroute._core import glob as core_glob
from toolroute.builtins._search import assemble, body_budget, cancellable, paging_footer, skip_notice
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.types import ToolOutput


class GlobRequest(BuiltinRequest):
    pattern: str = Field(
        min_length=1,
        description="gitignore-style glob relative to `path` (not to the workspace root): '**/*.py', "
        "'src/**/*.{ts,tsx}'; a pattern without '/' matches file names at any depth.",
    )
    path: str | None = Field(None, description="Folder to search; default the workspace root.")
    hidden: bool = Field(False, description="Include hidden (dot) files and directories.")
    no_ignore: bool = Field(False, description="Do not apply .gitignore/.ignore/git exclude rules.")
    sort: Literal["modified", "path"] = Field("modified", description="modified (newest first) or path.")
    head_limit: int | None = Field(
        None,
        ge=0,
        validation_alias=AliasChoices("head_limit", "maxResults", "limit"),
        description="Return at most this many paths (0 = no limit besides the output cap).",
    )
    offset: int = Field(0, ge=0, description="Skip this many paths (for paging).")
    follow_symlinks: bool = Field(False, description="Follow symlinks (only those resolving inside the roots).")


def run_glob(request: GlobRequest, ctx: BuiltInToolContext) -> GlobResult:
    """The structured listing (a `toolroute._core.GlobResult`), for Python callers and the tool."""
    return cancellable(lambda cancel: core_glob(ctx.confinement, request, cancel=cancel), "glob")


def _fit(paths: list[str], budget: int) -> list[str]:
    used = 0
    for i, p in enumerate(paths):
        used += len(p) + 1
        if used > budget:
            return paths[: max(i, 1)]
    return paths


def glob_handler(request: GlobRequest, ctx: BuiltInToolContext) -> ToolOutput:
    result = run_glob(request, ctx)
    stats = result.stats
    notice = skip_notice(stats)
    total = len(result)
    where = request.path or "."
    max_chars = ctx.limits.max_output_chars
    order = "newest first" if request.sort == "modified" else "sorted by path"
    if total == 0:
        header = f"No files match {request.pattern!r} under {where}."
    elif request.offset >= total:
        header = f"No results at offset {request.offset}: {total} files match."
    else:
        header = f"Found {total} file{'s' if total != 1 else ''} matching {request.pattern!r} under {where} ({order}):"
    budget = body_budget(max_chars, header, notice)
    # A path costs at least 2 characters, so no more than budget/2 can fit.
    limit = min(request.head_limit or total, budget // 2 + 1)
    paths = _fit(result.paths(request.offset, limit), budget) if total > request.offset else []
    modified = result.modified(request.offset, len(paths))
    footer = paging_footer(request.offset, len(paths), total, "glob") if paths else ""
    trace = {
        "tool": "glob",
        "pattern": request.pattern,
        "path": where,
        "sort": request.sort,
        "total": total,
        "offset": request.offset,
        "shown": len(paths),
        "files": [{"path": p, "modified": m} for p, m in zip(paths, modified, strict=True)],
        "skipped": stats,
    }
    return ToolOutput(assemble([header, "\n".join(paths), footer, notice], max_chars), trace)


TOOL = BuiltinTool(
    name="glob",
    description=(
        "Find files by gitignore-style glob ('**/*.py', '*.{ts,tsx}') relative to `path`, newest first or by "
        "path. Uses the same ignore rules as grep (.gitignore/.ignore, hidden files skipped) and says what it "
        "skipped."
    ),
    request_model=GlobRequest,
    handler=glob_handler,
    read_only=True,
)
