"""A call's outcome in each provider API's own form: text, images, audio and files, in order.

`toolroute.blocks` says what each of a result's blocks is; these functions put the parts into
the shapes the OpenAI (Chat Completions, Responses) and Anthropic APIs take, as plain dicts. The
frameworks' adapters do the same with their framework's types, in their own modules. A result
with no media gives exactly the text it always gave. What an API cannot carry is said in the
text, at its place (`blocks.not_carried`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolroute.allowlist import CallOutcome
from toolroute.blocks import Media, Part, Text, carries_media, not_carried, parts

# The image types both providers' vision inputs take.
PROVIDER_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Chat Completions' `input_audio` formats, by MIME type.
CHAT_AUDIO = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
PDF = "application/pdf"


def outcome_parts(outcome: CallOutcome) -> list[Part]:
    """The outcome's parts, in order: its blocks where they carry media, else its text alone
    (which says all of it: the path every text result keeps, at no cost per block)."""
    if not carries_media(outcome.content):
        return [Text(outcome.text)]
    return parts(outcome.content, outcome.text)


def with_media(items: Sequence[Part]) -> bool:
    return any(isinstance(p, Media) for p in items)


def error_marked(items: list[Part], outcome: CallOutcome) -> list[Part]:
    """For formats without an error flag: `Error: ` before the first text (as `model_text`)."""
    if not outcome.is_error:
        return items
    for i, part in enumerate(items):
        if isinstance(part, Text):
            return [*items[:i], Text(f"Error: {part.text}"), *items[i + 1 :]]
    return [Text("Error:"), *items]


def _base_mime(mime_type: str) -> str:
    return mime_type.split(";", 1)[0].strip().lower()


# ---- Anthropic: tool_result content --------------------------------------------------------


def anthropic_content(items: Sequence[Part]) -> list[dict[str, Any]]:
    """`tool_result` content blocks: text, image (PNG, JPEG, GIF, WebP) and document (PDF, plain
    text) blocks, in order; empty text is left out (the API refuses an empty text block)."""
    out: list[dict[str, Any]] = []
    for part in items:
        block = _anthropic_block(part) if isinstance(part, Media) else None
        if block is None and isinstance(part, Media):
            part = not_carried(part, ANTHROPIC_WHY)
        if isinstance(part, Text):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif block is not None:
            out.append(block)
    return out


ANTHROPIC_WHY = "Anthropic's tool results carry images (PNG, JPEG, GIF, WebP) and PDF or plain-text documents"


def _anthropic_block(media: Media) -> dict[str, Any] | None:
    mime = _base_mime(media.mime_type)
    if media.kind == "image" and mime in PROVIDER_IMAGES:
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": media.data}}
    if mime == PDF:
        document: dict[str, Any] = {
            "type": "document",
            "source": {"type": "base64", "media_type": PDF, "data": media.data},
        }
    elif mime == "text/plain":
        try:
            text = media.raw().decode("utf-8")
        except UnicodeDecodeError:
            return None
        document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    else:
        return None
    if media.uri:
        document["title"] = media.filename
    return document


# ---- OpenAI Responses: function_call_output ------------------------------------------------


RESPONSES_WHY_AUDIO = "a Responses API tool output carries text, images and files, not audio"
OPENAI_WHY_IMAGE = "OpenAI's image inputs are PNG, JPEG, WebP or GIF"


def responses_output(items: Sequence[Part]) -> list[dict[str, Any]]:
    """A `function_call_output`'s list form: `input_text`, `input_image` and `input_file` items."""
    out: list[dict[str, Any]] = []
    for part in items:
        if isinstance(part, Media):
            mime = _base_mime(part.mime_type)
            if part.kind == "image" and mime in PROVIDER_IMAGES:
                out.append({"type": "input_image", "image_url": part.data_url()})
                continue
            if part.kind == "file":
                out.append({"type": "input_file", "file_data": part.data_url(), "filename": part.filename})
                continue
            part = not_carried(part, RESPONSES_WHY_AUDIO if part.kind == "audio" else OPENAI_WHY_IMAGE)
        if part.text:
            out.append({"type": "input_text", "text": part.text})
    return out


# ---- OpenAI Chat Completions: a tool message (text) and the media after it -----------------


CHAT_WHY_FILE = "Chat Completions takes files only as PDF"
CHAT_WHY_AUDIO = "Chat Completions takes audio only as WAV or MP3"
CHAT_WHERE = "attached in the user message after the tool results"


def chat_split(items: Sequence[Part]) -> tuple[str, list[dict[str, Any]]]:
    """A tool message's text (each media marked at its place) and the media, as the content
    parts of the user message that follows the tool messages (tool messages carry text only)."""
    text: list[str] = []
    media: list[dict[str, Any]] = []
    for part in items:
        if isinstance(part, Text):
            text.append(part.text)
            continue
        attached = _chat_part(part)
        if attached is None:
            text.append(not_carried(part, _chat_why(part)).text)
        else:
            media.append(attached)
            text.append(f"[{part.label()}: {CHAT_WHERE}]")
    return "\n".join(text), media


def _chat_why(media: Media) -> str:
    return {"image": OPENAI_WHY_IMAGE, "audio": CHAT_WHY_AUDIO}.get(media.kind, CHAT_WHY_FILE)


def _chat_part(media: Media) -> dict[str, Any] | None:
    mime = _base_mime(media.mime_type)
    if media.kind == "image" and mime in PROVIDER_IMAGES:
        return {"type": "image_url", "image_url": {"url": media.data_url()}}
    if media.kind == "audio" and mime in CHAT_AUDIO:
        return {"type": "input_audio", "input_audio": {"data": media.data, "format": CHAT_AUDIO[mime]}}
    if mime == PDF:
        return {"type": "file", "file": {"file_data": media.data_url(), "filename": media.filename}}
    return None


def chat_media_message(attached: Sequence[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any] | None:
    """The user message after a batch's tool messages: each call's media under a line naming
    its call; None when no call had any."""
    content: list[dict[str, Any]] = []
    for call_id, media in attached:
        if media:
            content.append({"type": "text", "text": f"[the media of tool call {call_id}'s result, in order]"})
            content += media
    return {"role": "user", "content": content} if content else None


__all__ = [
    "PROVIDER_IMAGES",
    "anthropic_content",
    "chat_media_message",
    "chat_split",
    "error_marked",
    "outcome_parts",
    "responses_output",
    "with_media",
]
