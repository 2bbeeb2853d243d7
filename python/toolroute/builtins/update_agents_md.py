"""update_agents_md: read or write the AGENTS.md memory file at the workspace root."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from toolroute._core import read_file_head, write_file_text
from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError
from toolroute.types import ToolOutput

PRIMARY = "AGENTS.md"
FALLBACK = ".agents/AGENTS.md"  # where AI4J also looks


class UpdateAgentsMdRequest(BuiltinRequest):
    action: Literal["read", "write", "append"] = Field(
        default="read", description="read (default), write (replace the whole file) or append."
    )
    content: str | None = Field(default=None, description="New full text for write (or the text to append).")
    text: str | None = Field(default=None, description="Text to append (AI4J name; content also works).")

    @field_validator("action", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def memory_file(ctx: BuiltInToolContext) -> str:
    """AGENTS.md at the root if it exists, else .agents/AGENTS.md if that exists, else AGENTS.md."""
    root = ctx.workspace
    if not (root / PRIMARY).exists() and (root / FALLBACK).is_file():
        return FALLBACK
    return PRIMARY


def _current(ctx: BuiltInToolContext, rel: str) -> bytes | None:
    if not (ctx.workspace / rel).exists():
        return None
    _, data, size = read_file_head(ctx.confinement, rel, ctx.limits.agents_md_max_bytes)
    if size > len(data):
        raise ToolArgumentError(
            f"{rel} is {size} bytes, over the {ctx.limits.agents_md_max_bytes}-byte cap for the memory file"
        )
    return bytes(data)


def update_agents_md(request: UpdateAgentsMdRequest, ctx: BuiltInToolContext) -> ToolOutput:
    rel = memory_file(ctx)
    cap = ctx.limits.agents_md_max_bytes
    existing = _current(ctx, rel)
    if request.action == "read":
        if existing is None:
            return ToolOutput(f"{rel} does not exist yet.", {"action": "read", "path": rel, "exists": False})
        text = existing.decode("utf-8", errors="replace")
        return ToolOutput(text, {"action": "read", "path": rel, "exists": True, "bytes": len(existing)})
    if request.action == "write":
        if request.content is None:
            raise ToolArgumentError("action=write needs content (the whole new text of the memory file)")
        new_text, mode = request.content, "overwrite"
    else:
        addition = request.text if request.text is not None else request.content
        if not addition:
            raise ToolArgumentError("action=append needs text (or content) to append")
        needs_newline = bool(existing) and not existing.endswith(b"\n")  # type: ignore[union-attr]
        new_text, mode = ("\n" if needs_newline else "") + addition, "append"
    final_size = len(new_text.encode("utf-8")) + (len(existing or b"") if mode == "append" else 0)
    if final_size > cap:
        raise ToolArgumentError(
            f"{rel} would be {final_size} bytes, over the {cap}-byte cap for the memory file; "
            "shorten it (action=write with a condensed text)"
        )
    result = write_file_text(ctx.confinement, rel, new_text, mode, cap)
    verb = "Wrote" if request.action == "write" else "Appended to"
    trace = {"action": request.action, "path": rel, "created": result.created, "bytes": result.size}
    return ToolOutput(f"{verb} {rel} (now {result.size} bytes).", trace)


TOOL = BuiltinTool(
    name="update_agents_md",
    description=(
        "Read or update AGENTS.md, the project memory file at the workspace root (instructions and facts "
        "to remember across sessions). action: read (default), write (replace with content) or append "
        "(add text). Writes are atomic and size-capped."
    ),
    request_model=UpdateAgentsMdRequest,
    handler=update_agents_md,
    read_only=False,
)
