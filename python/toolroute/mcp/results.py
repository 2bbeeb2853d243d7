"""MCP `CallToolResult` -> `ToolOutput`: one string for the model, the rest in the trace.

The string is bounded and safe: at most `max_chars` characters of the server's content (cut
block by block, before anything is joined, so a 50 MB result is never copied whole), control
characters made visible (`toolroute.textsafety`), then one notice saying what was cut.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from toolroute._core import CUT_NOTICE
from toolroute.blocks import decoded_size, link_text, resource_header, size_text, utf8_len
from toolroute.errors import UpstreamToolError
from toolroute.textsafety import cut_notice, neutralize
from toolroute.types import ToolOutput

# What a model receives from one upstream call at most. 100,000 characters is about 25,000
# tokens, the default cap Claude Code puts on one MCP tool result (MAX_MCP_OUTPUT_TOKENS): enough
# for any answer meant for a model, small beside its context window, far below what hurts memory.
DEFAULT_MAX_RESULT_CHARS = 100_000


def _block_parts(block: Any) -> tuple[str, str]:
    """(header, payload) of one block. The payload is a text block's or text resource's own
    text, cut later without copying it whole; anything else is summarised with its type and
    size in the header (never base64)."""
    if isinstance(block, types.TextContent):
        return "", block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        return f"[{block.type}: {block.mime_type}, {size_text(decoded_size(block.data))}]", ""
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return resource_header(res), res.text
        return f"[resource {res.uri} ({res.mime_type or 'unknown type'}, {size_text(decoded_size(res.blob))})]", ""
    if isinstance(block, types.ResourceLink):
        return link_text(block), ""
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content]", ""


def _visible_prefix(raw: str, budget: int) -> tuple[str, int]:
    """Neutralised text of the longest prefix of `raw` that fits `budget` characters once
    escaped: (text, raw characters used). Escapes never split; a CRLF is never cut in two."""

    def prefix(n: int) -> tuple[str, int]:
        if 0 < n < len(raw) and raw[n - 1] == "\r" and raw[n] == "\n":
            n -= 1  # a lone CR would be escaped
        return neutralize(raw[:n]), n

    hi = min(len(raw), budget)
    text, used = prefix(hi)
    if len(text) <= budget:  # the common case: no escapes, or few enough
        return text, used
    lo = 0  # prefix(lo) fits, prefix(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if len(prefix(mid)[0]) <= budget:
            lo = mid
        else:
            hi = mid
    return prefix(lo)


def _bounded(content: list[Any], max_chars: int) -> tuple[str, int, int]:
    """The blocks joined by newlines in at most `max_chars` characters: (text, raw characters
    shown, raw characters in all)."""
    out: list[str] = []
    budget, shown, total = max_chars, 0, 0
    for i, block in enumerate(content):
        for raw in ("\n" if i else "", *_block_parts(block)):
            total += len(raw)
            if budget > 0 and raw:
                text, used = _visible_prefix(raw, budget)
                out.append(text)
                budget -= len(text)
                shown += used
                if used < len(raw):
                    budget = 0  # cut here: what follows would not continue the text shown
    return "".join(out), shown, total


def _capped(content: list[Any], max_chars: int) -> tuple[str, dict[str, int] | None, str]:
    """The text and, when it was cut, a notice after it and the sizes for the trace: the notice
    is inside the cap (`max_chars` bounds what the model reads, the notice included), and the
    notice alone ("" when nothing was cut)."""
    if len(content) == 1 and isinstance(content[0], types.TextContent):  # most answers: one short text
        whole = neutralize(content[0].text)
        if len(whole) <= max_chars:
            return whole, None, ""
    text, shown, total = _bounded(content, max_chars)
    if shown == total:
        return text, None, ""

    def notice(shown: int) -> str:
        return cut_notice(
            total - shown,
            total,
            "characters",
            f"this gateway passes at most {max_chars} characters of one MCP result; "
            "ask the tool for less (a narrower query, a page or a range) to see the rest",
        )

    # The longest notice (nothing shown) leaves the room for the text; showing more only
    # shortens the count in it.
    room = max_chars - len(notice(0)) - 1
    if room > 0:
        text, shown, _ = _bounded(content, room)
        said = notice(shown)
        cut = f"{text}\n{said}"
    else:  # a cap smaller than the notice: the short one, if even that fits
        short = max_chars - len(CUT_NOTICE)
        text, shown, _ = _bounded(content, max(short, 0) if short > 0 else max_chars)
        said = CUT_NOTICE if short > 0 else ""
        cut = text + said
    return cut, {"shown_chars": shown, "total_chars": total, "max_chars": max_chars}, said


def cut_blocks(content: list[Any], shown: int, notice: str) -> list[Any]:
    """A cut result's blocks: of its text, what the text the model reads showed (`shown` raw
    characters, walked as `_bounded` walks them: the block the cut falls in is cut, later text is
    left out); every image, audio, blob and link in its place, whatever the cut (the cap is on
    text); the notice last."""
    out: list[Any] = []
    left = shown
    for i, block in enumerate(content):
        header, payload = _block_parts(block)
        left -= (1 if i else 0) + len(header)
        text_resource = isinstance(block, types.EmbeddedResource) and isinstance(
            block.resource, types.TextResourceContents
        )
        if not (isinstance(block, types.TextContent) or text_resource):
            out.append(block)
            continue
        if left > 0:
            kept = neutralize(payload[:left])
            if isinstance(block, types.TextContent):
                out.append(block.model_copy(update={"text": kept}))
            else:
                out.append(block.model_copy(update={"resource": block.resource.model_copy(update={"text": kept})}))
        left -= len(payload)
    if notice:
        out.append(types.TextContent(text=notice))
    return out


def content_meta(block: Any) -> dict[str, Any]:
    """Metadata of one block for the trace: type, MIME type, size, URI; never the payload."""
    meta: dict[str, Any] = {"type": getattr(block, "type", type(block).__name__)}
    if isinstance(block, types.TextContent):
        meta["chars"] = len(block.text)
    elif isinstance(block, (types.ImageContent, types.AudioContent)):
        meta.update(mime_type=block.mime_type, bytes=decoded_size(block.data))
    elif isinstance(block, types.EmbeddedResource):
        res = block.resource
        size = utf8_len(res.text) if isinstance(res, types.TextResourceContents) else decoded_size(res.blob)
        meta.update(uri=str(res.uri), mime_type=res.mime_type, bytes=size)
    elif isinstance(block, types.ResourceLink):
        meta.update(uri=str(block.uri), name=block.name, mime_type=block.mime_type, bytes=block.size)
    return meta


def content_text(content: list[Any], max_chars: int = DEFAULT_MAX_RESULT_CHARS) -> str:
    """What the model reads for `content`: the capped, neutralised text and any cut notice."""
    return _capped(content, max_chars)[0]


def to_output(
    result: types.CallToolResult,
    *,
    service: str,
    tool: str,
    exposed_name: str,
    max_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> ToolOutput:
    """The model-facing text (capped, controls visible), and the server's blocks as they came
    (a cut result's text blocks cut alike, its media all kept: `cut_blocks`); an `isError`
    result raises with the server's own text, the gateway's context in the trace."""
    text, cut, notice = _capped(result.content, max_chars)
    trace: dict[str, Any] = {
        "mcp": {"service": service, "tool": tool},
        # A cut result's structured copy is as large as what was cut: not kept alive in the trace.
        "structured_content": result.structured_content if cut is None else None,
        "content": [content_meta(b) for b in result.content],
        "meta": result.meta,
    }
    if cut is not None:
        trace["truncated"] = cut
    if cut is not None:
        blocks = cut_blocks(result.content, cut["shown_chars"], notice)
    elif len(result.content) == 1 and isinstance(result.content[0], types.TextContent):
        blocks = [_with_text(result.content[0], text)]  # one text, uncut: the model's text is its block's
    else:
        blocks = passed_blocks(result.content)
    if result.is_error:
        trace["error"] = True
        raise UpstreamToolError(text or "(the server gave no message)", tool=exposed_name, trace=trace, content=blocks)
    return ToolOutput(text, trace, blocks)


def passed_blocks(content: list[Any]) -> list[Any]:
    """The server's blocks as a served client gets them: as they came, text blocks' control
    characters made visible (as in the text a model reads)."""
    return [_with_text(b, neutralize(b.text)) if isinstance(b, types.TextContent) else b for b in content]


def _with_text(block: types.TextContent, safe: str) -> types.TextContent:
    """`block` with its text made visible (`safe`, already neutralised): itself when nothing changed."""
    return block if safe is block.text or safe == block.text else block.model_copy(update={"text": safe})
