"""write_file: create, overwrite or append, atomically, inside the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator

from toolroute._core import write_file_text
from toolroute.builtins._diagnostics import refusing_errors
from toolroute.builtins._fileio import display_path
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError
from toolroute.types import ToolOutput

WriteMode = Literal["create", "overwrite", "append"]


class WriteFileRequest(BuiltinRequest):
    path: str = Field(description="File to write, relative to the workspace root; parent folders are created.")
    content: str = Field(description="The text to write.")
    mode: WriteMode = Field(
        default="overwrite",
        description="create (fails if the file exists), overwrite (default) or append.",
    )
    write_read_only: bool = Field(
        default=False,
        description="Also change a file whose permissions say read-only (e.g. 0444); its mode is kept.",
        validation_alias=AliasChoices("write_read_only", "writeReadOnly"),
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def write_file(request: WriteFileRequest, ctx: BuiltInToolContext) -> ToolOutput:
    return refusing_errors(ctx, request.path, lambda: _write(request, ctx))


def _write(request: WriteFileRequest, ctx: BuiltInToolContext) -> tuple[ToolOutput, Path]:
    limits = ctx.limits
    size = len(request.content.encode("utf-8"))
    if size > limits.max_write_bytes:
        raise ToolArgumentError(
            f"content is {size} bytes, over the {limits.max_write_bytes}-byte limit for one write; "
            "write it in parts with mode=append"
        )
    result = write_file_text(
        ctx.confinement,
        request.path,
        request.content,
        request.mode,
        limits.max_file_bytes,
        write_read_only=request.write_read_only,
    )
    shown = display_path(ctx, result.resolved)
    written = result.bytes_written
    if request.mode == "append" and not result.created:
        text = f"Appended {written} bytes to {shown} (now {result.size} bytes)."
    elif result.created:
        text = f"Created {shown} ({written} bytes)."
    else:
        text = f"Overwrote {shown} ({written} bytes)."
    trace = {"path": shown, "mode": request.mode, "created": result.created, "bytes_written": written}
    return ToolOutput(text, trace), result.resolved


TOOL = BuiltinTool(
    name="write_file",
    description=(
        "Write a text file in the workspace. mode: create (refuses to replace an existing file), overwrite "
        "(default) or append. Parent folders are created; the write is atomic and keeps the file's "
        "owner, permissions, encoding (BOM, UTF-16, Latin-1) and CRLF line endings. Read-only files are "
        "refused unless write_read_only is true. Prefer edit or apply_patch to change part of a file."
    ),
    request_model=WriteFileRequest,
    handler=write_file,
    read_only=False,
)
