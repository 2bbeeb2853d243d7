"""apply_patch: the Codex CLI patch format, applied to every file or to none."""

from __future__ import annotations

from pydantic import AliasChoices, Field

from toolroute._core import apply_patch as apply_patch_core
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.types import ToolOutput


class ApplyPatchRequest(BuiltinRequest):
    patch: str = Field(
        description="The whole patch, from '*** Begin Patch' to '*** End Patch'.",
        validation_alias=AliasChoices("patch", "input"),
    )
    write_read_only: bool = Field(
        default=False,
        description="Also change a file whose permissions say read-only (e.g. 0444); its mode is kept.",
        validation_alias=AliasChoices("write_read_only", "writeReadOnly"),
    )


def apply_patch(request: ApplyPatchRequest, ctx: BuiltInToolContext) -> ToolOutput:
    result = apply_patch_core(
        ctx.confinement, request.patch, ctx.limits.max_file_bytes, write_read_only=request.write_read_only
    )
    trace = {
        "added": result.added,
        "modified": result.modified,
        "moved": [{"from": src, "to": dst} for src, dst in result.moved],
        "deleted": result.deleted,
        "files": [
            {
                "path": f.path,
                "action": f.action,
                "hunks": [{"line": line, "match": match} for line, match in f.hunks],
            }
            for f in result.files
        ],
    }
    return ToolOutput(result.summary, trace)


TOOL = BuiltinTool(
    name="apply_patch",
    description=(
        "Apply a patch in the Codex format. Envelope: '*** Begin Patch' ... '*** End Patch'. Sections: "
        "'*** Add File: <path>' then '+' lines; '*** Delete File: <path>'; '*** Update File: <path>' "
        "(optionally '*** Move to: <path>') then hunks starting with '@@' or '@@ <class/def line>', with "
        "' ' context, '-' removed and '+' added lines (3 lines of context around changes), and "
        "'*** End of File' for changes at the end. Paths are relative to the workspace. The patch is "
        "all-or-nothing: if any hunk does not match, no file is changed (even across a crash). Deleting or "
        "moving a symlink acts on the link itself. Read-only files are refused unless write_read_only is true."
    ),
    request_model=ApplyPatchRequest,
    handler=apply_patch,
    read_only=False,
)
