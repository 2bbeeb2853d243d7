"""edit: replace an exact string in a file (unique unless replace_all), bytes elsewhere untouched."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field

from toolroute._core import edit_file
from toolroute.builtins._diagnostics import refusing_errors
from toolroute.builtins._fileio import display_path
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.types import ToolOutput


class EditRequest(BuiltinRequest):
    path: str = Field(description="File to edit, relative to the workspace root.")
    old_string: str = Field(description="Exact text to replace, including whitespace and indentation (tabs stay tabs).")
    new_string: str = Field(description="Replacement text (must differ from old_string).")
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence; otherwise old_string must occur exactly once.",
        validation_alias=AliasChoices("replace_all", "replaceAll"),
    )
    write_read_only: bool = Field(
        default=False,
        description="Also change a file whose permissions say read-only (e.g. 0444); its mode is kept.",
        validation_alias=AliasChoices("write_read_only", "writeReadOnly"),
    )


def _lines_text(lines: list[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:10])
    return shown + (", …" if len(lines) > 10 else "")


def edit(request: EditRequest, ctx: BuiltInToolContext) -> ToolOutput:
    return refusing_errors(ctx, request.path, lambda: _edit(request, ctx))


def _edit(request: EditRequest, ctx: BuiltInToolContext) -> tuple[ToolOutput, Path]:
    result = edit_file(
        ctx.confinement,
        request.path,
        request.old_string,
        request.new_string,
        request.replace_all,
        ctx.limits.max_file_bytes,
        write_read_only=request.write_read_only,
    )
    shown = display_path(ctx, result.resolved)
    count = result.replacements
    lines = result.lines
    noun = "replacement" if count == 1 else "replacements"
    where = "line" if count == 1 else "lines"
    text = f"Edited {shown}: {count} {noun} at {where} {_lines_text(lines)}."
    if result.eol_adapted:
        text += " (old_string/new_string line endings were matched to the file's.)"
    trace = {"path": shown, "replacements": count, "lines": lines, "eol_adapted": result.eol_adapted}
    return ToolOutput(text, trace), result.resolved


TOOL = BuiltinTool(
    name="edit",
    description=(
        "Replace an exact string in a file. old_string must match the file exactly (whitespace, tabs and "
        "indentation included) and occur once, unless replace_all is true. On a miss the error shows the "
        "nearest near-match (line and excerpt). Line endings, BOM and non-UTF-8 bytes elsewhere are kept."
    ),
    request_model=EditRequest,
    handler=edit,
    read_only=False,
)
