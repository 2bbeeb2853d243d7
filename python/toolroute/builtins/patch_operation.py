"""One file's change as OpenAI's `apply_patch` tool type sends it: the one shape of a V4A
operation from a native `apply_patch_call` to the Rust engine.

The native adapters take it from the provider's item (`PatchOperation.of`, unvalidated: the
built-in's request validates it at the allowlist's door, so a bad operation is the call's
error, not the adapter's), `apply_patch`'s request holds a list of them, and the binding reads
its four attributes into `edits::patch::V4aOperation`, where V4A's rules live.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PatchOperation(BaseModel):
    """One V4A operation: `create_file` (a diff of `+` lines), `update_file` (a V4A diff,
    optionally moving the file to `move_to`) or `delete_file` (no diff)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["create_file", "update_file", "delete_file"]
    path: str = Field(min_length=1)
    diff: str | None = None
    move_to: str | None = Field(default=None, min_length=1)  # an update's new path

    @classmethod
    def of(cls, operation: Any) -> PatchOperation:
        """From the SDK's model or a plain mapping, as given (validated where it is applied)."""
        get = operation.get if isinstance(operation, Mapping) else lambda k, d=None: getattr(operation, k, d)
        return cls.model_construct(
            type=str(get("type")), path=str(get("path")), diff=get("diff"), move_to=get("move_to")
        )

    def done(self) -> str:
        """What OpenAI's reference editor answers when it is applied."""
        verb = {"create_file": "Created", "update_file": "Updated", "delete_file": "Deleted"}.get(self.type, "Applied")
        moved = f"\nMoved {self.path} to {self.move_to}" if self.move_to else ""
        return f"{verb} {self.path}{moved}"


__all__ = ["PatchOperation"]
