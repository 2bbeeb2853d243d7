"""apply_patch: the Codex CLI patch format, applied to every file or to none.

Besides the patch text (the function tool's one argument, and Codex's freeform form), the
request takes `operations`: OpenAI's `apply_patch` tool type sends each file's change apart as
a V4A diff (`create_file`, `update_file`, `delete_file`), which the native adapters hand over
here, so a native call is the same tool call (allowlist, approval, trace, audit) applied by the
same engine, by V4A's rules (docs/native.md). Models calling the function are not shown it.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from toolroute._core import apply_patch as apply_patch_core
from toolroute._core import apply_v4a
from toolroute.builtins._diagnostics import with_diagnostics
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.builtins.patch_operation import PatchOperation
from toolroute.context import BuiltInToolContext
from toolroute.types import ToolOutput


def _patch_required(schema: dict[str, Any]) -> None:
    """The schema models see: the patch text, required, as ever (`operations` is the adapters')."""
    schema["required"] = ["patch"]
    schema["properties"]["patch"].pop("default", None)


class ApplyPatchRequest(BuiltinRequest):
    model_config = ConfigDict(json_schema_extra=_patch_required)

    patch: str | SkipJsonSchema[None] = Field(
        default=None,
        description="The whole patch, from '*** Begin Patch' to '*** End Patch'.",
        validation_alias=AliasChoices("patch", "input"),
    )
    operations: SkipJsonSchema[list[PatchOperation] | None] = Field(
        default=None, description="V4A operations (OpenAI's apply_patch tool type), applied all or none"
    )
    write_read_only: bool = Field(
        default=False,
        description="Also change a file whose permissions say read-only (e.g. 0444); its mode is kept.",
        validation_alias=AliasChoices("write_read_only", "writeReadOnly"),
    )

    @model_validator(mode="after")
    def _one_form(self) -> ApplyPatchRequest:
        if (self.patch is None) == (self.operations is None):
            raise ValueError("give either the patch text or V4A operations, not both and not neither")
        return self


def apply_patch(request: ApplyPatchRequest, ctx: BuiltInToolContext) -> ToolOutput:
    if request.operations is not None:
        result = apply_v4a(
            ctx.confinement, request.operations, ctx.limits.max_file_bytes, write_read_only=request.write_read_only
        )
    else:
        assert request.patch is not None
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
    changed = [*result.added, *result.modified, *(dst for _, dst in result.moved)]
    # Resolved only when checkers run (a confinement lookup per file otherwise wasted).
    return with_diagnostics(ctx, ToolOutput(result.summary, trace), (ctx.resolve(p) for p in changed))


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
