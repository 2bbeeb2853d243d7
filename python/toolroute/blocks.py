"""A tool's answer as the parts a model is shown: text, and media in the tool's own bytes.

A tool answers in text, or in MCP content blocks (an upstream MCP tool; `read_file` of an image
or a PDF): text, images, audio, embedded resources (text or bytes) and resource links. Every
framework adapter passes those on in its framework's own form and in their order; this module
says once what each block is for that purpose, so the adapters differ only in the form:

- `Text`: a text block; an embedded text resource (its URI and type on a first line, then its
  text); a resource link (its URI, name, type and size: a link is a reference, and that is all
  of it).
- `Media`: an image, an audio clip, or an embedded resource's bytes (an image or audio by its
  MIME type, else a file), carried as the tool's own base64, never decoded and encoded again.

Where a framework or an API cannot carry a kind, its adapter says so in the text, at the
media's place (`not_carried`): what it was and why it is not there, never only its size.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types

from toolroute.textsafety import neutralize

MediaKind = Literal["image", "audio", "file"]


@dataclass(frozen=True)
class Text:
    """Text the model reads."""

    text: str


@dataclass(frozen=True)
class Media:
    """Bytes the model is shown: `data` is the tool's base64, as it came."""

    kind: MediaKind
    mime_type: str
    data: str
    uri: str | None = None  # an embedded resource's URI

    def raw(self) -> bytes:
        """The bytes themselves."""
        return base64.b64decode(self.data)

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.data}"

    @property
    def filename(self) -> str:
        """A file name for formats that want one: the URI's last segment, else the kind."""
        name = posixpath.basename(self.uri.split("?", 1)[0].rstrip("/")) if self.uri else ""
        return neutralize(name) or f"{self.kind}.{self.mime_type.rsplit('/', 1)[-1].split(';')[0] or 'bin'}"

    def label(self) -> str:
        """What it is, in words: `image (image/png, 70 bytes)`, `resource file:///a.pdf (...)`."""
        what = f"resource {neutralize(self.uri)}" if self.uri else self.kind
        return f"{what} ({neutralize(self.mime_type)}, {size_text(decoded_size(self.data))})"


Part = Text | Media


def decoded_size(data: str) -> int | None:
    """Bytes that base64 `data` decodes to, computed from its length (no decoded copy)."""
    if not data.isascii():
        return None
    n = len(data) - sum(data.count(c) for c in " \t\r\n")
    if n % 4:
        return None
    return n // 4 * 3 - data.rstrip()[-2:].count("=")


def size_text(size: int | None) -> str:
    return f"{size} bytes" if size is not None else "unknown size"


def utf8_len(text: str) -> int:
    """Bytes of `text` in UTF-8 without a copy in the common (ASCII) case; lone surrogates count."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def resource_header(resource: types.TextResourceContents) -> str:
    """The line before an embedded text resource's text."""
    mime = resource.mime_type or "unknown type"
    return f"[resource {resource.uri} ({mime}, {utf8_len(resource.text)} bytes)]\n"


def link_text(link: types.ResourceLink) -> str:
    """A resource link in words: all a link is."""
    mime = link.mime_type or "unknown type"
    size = f", {link.size} bytes" if link.size is not None else ""
    about = f": {link.description}" if link.description else ""
    return f"[resource link {link.uri} ({link.title or link.name}, {mime}{size}){about}]"


def _media_kind(mime_type: str) -> MediaKind:
    major = mime_type.split("/", 1)[0].lower()
    return "image" if major == "image" else "audio" if major == "audio" else "file"


def _media(kind: MediaKind, mime_type: str, data: str, uri: str | None = None) -> Part:
    """Media whose data decodes; else the words for what a server sent that does not."""
    media = Media(kind, mime_type, data, uri)
    if _decodes(data):
        return media
    squeezed = "".join(data.split())  # base64 wrapped in lines, as MIME writes it
    if squeezed != data and _decodes(squeezed):
        return Media(kind, mime_type, squeezed, uri)
    return not_carried(media, "its data is not valid base64")


def _decodes(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def part_of(block: Any) -> Part:
    """One MCP content block as a part (third-party words made visible, `textsafety`)."""
    if isinstance(block, types.TextContent):
        return Text(neutralize(block.text))
    if isinstance(block, types.ImageContent):
        return _media("image", block.mime_type, block.data)
    if isinstance(block, types.AudioContent):
        return _media("audio", block.mime_type, block.data)
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return Text(neutralize(resource_header(res) + res.text))
        mime = res.mime_type or "application/octet-stream"
        return _media(_media_kind(mime), mime, res.blob, str(res.uri))
    if isinstance(block, types.ResourceLink):
        return Text(neutralize(link_text(block)))
    return Text(f"[{neutralize(str(getattr(block, 'type', type(block).__name__)))} content]")


def parts(content: Sequence[Any] | None, text: str) -> list[Part]:
    """A result's parts in order: its blocks, or (a tool that answered in text) its text."""
    if content is None:
        return [Text(text)]
    return [part_of(block) for block in content]


def carries_media(content: Sequence[Any] | None) -> bool:
    """Whether a result's blocks hold bytes (an image, audio, an embedded blob): else its text
    says all of it. A look at the blocks' types alone."""
    return content is not None and any(
        isinstance(block, (types.ImageContent, types.AudioContent))
        or (isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents))
        for block in content
    )


def not_carried(media: Media, why: str) -> Text:
    """The text left at a media's place where it cannot go: what it was, and why."""
    return Text(f"[{media.label()}: not passed on, {why}]")


__all__ = [
    "Media",
    "MediaKind",
    "Part",
    "Text",
    "carries_media",
    "decoded_size",
    "link_text",
    "not_carried",
    "part_of",
    "parts",
    "resource_header",
    "size_text",
    "utf8_len",
]
