"""MCP `CallToolResult` -> `ToolOutput`: one string for the model, the rest in the trace."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import mcp_types as types

from toolroute.errors import ToolExecutionError
from toolroute.types import ToolOutput


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return None


def _size_text(size: int | None) -> str:
    return f"{size} bytes" if size is not None else "unknown size"


def block_text(block: Any) -> str:
    """A text block as is; anything else summarised with its type and size (never base64)."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        return f"[{block.type}: {block.mime_type}, {_size_text(_decoded_size(block.data))}]"
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        mime = res.mime_type or "unknown type"
        if isinstance(res, types.TextResourceContents):
            return f"[resource {res.uri} ({mime}, {len(res.text.encode())} bytes)]\n{res.text}"
        return f"[resource {res.uri} ({mime}, {_size_text(_decoded_size(res.blob))})]"
    if isinstance(block, types.ResourceLink):
        mime = block.mime_type or "unknown type"
        size = f", {block.size} bytes" if block.size is not None else ""
        return f"[resource link {block.uri} ({block.name}, {mime}{size})]"
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content]"


def content_text(content: list[Any]) -> str:
    return "\n".join(block_text(b) for b in content)


def content_meta(block: Any) -> dict[str, Any]:
    """Metadata of one block for the trace: type, MIME type, size, URI; never the payload."""
    meta: dict[str, Any] = {"type": getattr(block, "type", type(block).__name__)}
    if isinstance(block, types.TextContent):
        meta["chars"] = len(block.text)
    elif isinstance(block, (types.ImageContent, types.AudioContent)):
        meta.update(mime_type=block.mime_type, bytes=_decoded_size(block.data))
    elif isinstance(block, types.EmbeddedResource):
        res = block.resource
        size = len(res.text.encode()) if isinstance(res, types.TextResourceContents) else _decoded_size(res.blob)
        meta.update(uri=str(res.uri), mime_type=res.mime_type, bytes=size)
    elif isinstance(block, types.ResourceLink):
        meta.update(uri=str(block.uri), name=block.name, mime_type=block.mime_type, bytes=block.size)
    return meta


def to_output(result: types.CallToolResult, *, service: str, tool: str, exposed_name: str) -> ToolOutput:
    """The model-facing text; `is_error` raises with the server's own message."""
    text = content_text(result.content)
    if result.is_error:
        raise ToolExecutionError(
            f"MCP tool {tool!r} on server {service!r} reported an error: {text or '(no message)'}",
            tool=exposed_name,
        )
    trace = {
        "mcp": {"service": service, "tool": tool},
        "structured_content": result.structured_content,
        "content": [content_meta(b) for b in result.content],
        "meta": result.meta,
    }
    return ToolOutput(text, trace)
