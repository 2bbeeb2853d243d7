"""read_file's images and PDFs: what a model is shown of a file that is not text.

A PNG, JPEG, GIF or WebP comes back as an image block, within the providers' limits
(`ToolLimits.max_image_edge`, `max_image_bytes`): passed as it is when it fits, else downscaled
(and re-encoded) until it does, or refused with a note saying why. An animated GIF or WebP is
shown as its first frame (OpenAI takes no animation). A PDF comes back as its text, page by page,
`max_pdf_pages` at a time (`pages` chooses them), and each page as an image when asked.

The bytes are read as text is: beneath the roots by descriptor (`_core.read_file_head`), within
`max_file_bytes`. Decoding is Pillow's and pdfium's (pypdfium2): the `media` extra. Without it,
a file that is an image or a PDF is refused with the command that installs it.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolroute._core import CUT_NOTICE
from toolroute.context import ToolLimits
from toolroute.errors import ToolArgumentError, ToolPreconditionError
from toolroute.outputcap import cap_text
from toolroute.textsafety import neutralize
from toolroute.types import ToolOutput

if TYPE_CHECKING:
    from PIL.Image import Image

EXTRA = "pip install 'toolroute[media]'"
IMAGE_FORMATS = ("PNG", "JPEG", "GIF", "WEBP")  # what both providers' vision inputs take
# Rust's sniff (text_style.rs) names these; WebP has no fixed prefix there, so its suffix tells.
SNIFFED_IMAGES = {"PNG image": "PNG", "JPEG image": "JPEG", "GIF image": "GIF"}
PDF_KIND = "PDF document"
PDF_DPI = 150  # pages rendered at most this fine (then fitted to the image limits)
SHRINK_STEPS = 6  # downscaling rounds at most before an image that stays too large is refused
JPEG_QUALITY = 85


def is_media_read(trace: Any) -> bool:
    """Whether a read_file trace is of an image or a PDF (a result with its own blocks)."""
    return isinstance(trace, dict) and trace.get("kind") in ("image", "pdf")


def media_kind(sniffed: str, path: str) -> str | None:
    """ "image" or "pdf" for a file read_file shows as media (by Rust's sniff of its first bytes;
    a WebP by its name, which only chooses whether Pillow is asked), else None."""
    if sniffed == PDF_KIND:
        return "pdf"
    if sniffed in SNIFFED_IMAGES or path.lower().endswith(".webp"):
        return "image"
    return None


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ToolPreconditionError(f"showing images needs Pillow, which is not installed: {EXTRA}") from None
    return Image


def _pdfium() -> Any:
    try:
        import pypdfium2
    except ImportError:
        raise ToolPreconditionError(f"reading PDFs needs pypdfium2, which is not installed: {EXTRA}") from None
    return pypdfium2


# ---- images ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """An image as a model is shown it: its bytes and type, its size, and what was done to it."""

    data: bytes
    mime_type: str
    width: int
    height: int
    notes: tuple[str, ...] = ()

    def block(self) -> types.ImageContent:
        return types.ImageContent(data=base64.b64encode(self.data).decode("ascii"), mime_type=self.mime_type)


class NotShown(Exception):
    """An image that cannot be shown within the limits (or cannot be decoded), and why."""


def fit_image(data: bytes, limits: ToolLimits) -> Shown:
    """`data` (PNG, JPEG, GIF or WebP) within the limits: as it is when it fits, else downscaled."""
    pil = _pillow()
    try:
        with pil.open(io.BytesIO(data), formats=IMAGE_FORMATS) as image:
            return _fit(pil, image, data, limits)
    except NotShown:
        raise
    except (pil.UnidentifiedImageError, pil.DecompressionBombError, OSError, ValueError, SyntaxError) as exc:
        raise NotShown(f"it could not be decoded as an image ({exc})") from None


def _fit(pil: Any, image: Image, data: bytes, limits: ToolLimits) -> Shown:
    width, height = image.size
    pixels = width * height
    if pixels > limits.max_image_pixels:
        raise NotShown(f"it is {width}x{height} pixels, over the {limits.max_image_pixels} read_file decodes")
    mime = pil.MIME[image.format]
    frames = getattr(image, "n_frames", 1)
    fits = max(width, height) <= limits.max_image_edge and len(data) <= limits.max_image_bytes
    if fits and frames == 1:
        return Shown(data, mime, width, height)
    notes = [f"first frame of {frames}"] if frames > 1 else []
    if image.format == "JPEG":  # decode at a reduced scale where JPEG allows it (cheaper)
        image.draft("RGB", _within((width, height), limits.max_image_edge))
    frame = _flat(pil, image)
    jpeg = image.format == "JPEG"  # a photo stays a JPEG; the rest become PNG, or JPEG when too large
    for size in _sizes(frame.size, limits.max_image_edge):
        scaled = frame if size == frame.size else frame.resize(size, pil.Resampling.LANCZOS)
        out, mime = _encode(scaled, jpeg=jpeg)
        if len(out) > limits.max_image_bytes and not jpeg and scaled.mode == "RGB":
            out, mime = _encode(scaled, jpeg=True)
        if len(out) <= limits.max_image_bytes:
            if size != (width, height):
                notes.append(f"downscaled from {width}x{height} to fit the providers' limits")
            return Shown(out, mime, size[0], size[1], tuple(notes))
    raise NotShown(
        f"even at {size[0]}x{size[1]} it takes {len(out)} bytes, over the {limits.max_image_bytes} one image may take"
    )


def _flat(pil: Any, image: Image) -> Image:
    """The (first) frame, upright, in RGB, or RGBA where it has transparency."""
    from PIL import ImageOps

    image.seek(0)
    frame = ImageOps.exif_transpose(image) or image
    alpha = frame.mode in ("RGBA", "LA", "PA") or (frame.mode == "P" and "transparency" in frame.info)
    converted: Image = frame.convert("RGBA" if alpha else "RGB")
    return converted


def _encode(image: Image, *, jpeg: bool) -> tuple[bytes, str]:
    buffer = io.BytesIO()
    if jpeg:
        image.convert("RGB").save(buffer, "JPEG", quality=JPEG_QUALITY, optimize=True)
        return buffer.getvalue(), "image/jpeg"
    image.save(buffer, "PNG", optimize=True)
    return buffer.getvalue(), "image/png"


def _within(size: tuple[int, int], edge: int) -> tuple[int, int]:
    width, height = size
    scale = min(1.0, edge / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _sizes(size: tuple[int, int], edge: int) -> Iterator[tuple[int, int]]:
    """Sizes to try: within the edge, then smaller by a quarter each time."""
    width, height = _within(size, edge)
    for _ in range(SHRINK_STEPS):
        yield width, height
        width, height = max(1, width * 3 // 4), max(1, height * 3 // 4)


def image_output(data: bytes, shown: str, limits: ToolLimits) -> ToolOutput:
    """read_file's answer for an image file: a line saying what it is, and the image."""
    try:
        image = fit_image(data, limits)
    except NotShown as why:
        raise ToolPreconditionError(f"{shown} is not shown as an image: {why}") from None
    notes = f" ({'; '.join(image.notes)})" if image.notes else ""
    caption = f"{shown}: {image.mime_type} image, {image.width}x{image.height} pixels, {len(data)} bytes{notes}"
    trace = {
        "path": shown,
        "kind": "image",
        "mime_type": image.mime_type,
        "width": image.width,
        "height": image.height,
        "file_bytes": len(data),
        "image_bytes": len(image.data),
        "notes": list(image.notes),
    }
    return ToolOutput(caption, trace, [types.TextContent(text=caption), image.block()])


# ---- PDFs ------------------------------------------------------------------------------------

PAGES = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def page_numbers(spec: str | None, total: int, most: int) -> list[int]:
    """The 1-based pages `spec` names ("3", "1-5", "2,4-6"), in order, each once: at most `most`
    of them; all (the first `most`) when `spec` is None."""
    if spec is None:
        return list(range(1, min(total, most) + 1))
    chosen: list[int] = []
    for piece in spec.split(","):
        match = PAGES.match(piece)
        if match is None:
            raise ToolArgumentError(f"pages {spec!r}: expected page numbers and ranges such as '3', '1-5' or '2,4-6'")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < 1 or last < first:
            raise ToolArgumentError(f"pages {spec!r}: a range counts up from page 1")
        if first > total:
            raise ToolArgumentError(f"pages {spec!r}: the PDF has {total} pages")
        chosen += range(first, min(last, total) + 1)
    unique = list(dict.fromkeys(chosen))
    if len(unique) > most:
        raise ToolArgumentError(f"pages {spec!r} names {len(unique)} pages; read_file returns at most {most} at a time")
    return unique


def pdf_output(data: bytes, shown: str, pages: str | None, images: bool, cap: int, limits: ToolLimits) -> ToolOutput:
    """read_file's answer for a PDF: each page's text under a line naming it, cut to `cap`
    characters with a note saying where to read on; with `images`, each page's image after it."""
    pdfium = _pdfium()
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise ToolPreconditionError(f"{shown} could not be opened as a PDF ({exc})") from None
    try:
        total = len(document)
        if total == 0:
            return ToolOutput(f"{shown} is a PDF with no pages.", _pdf_trace(shown, 0, [], images, False))
        numbers = page_numbers(pages, total, limits.max_pdf_pages)
        texts = [_page_text(document, n) for n in numbers]
        pictures = [_page_image(document, n, limits) for n in numbers] if images else []
    finally:
        document.close()
    return _pdf_result(shown, total, numbers, texts, pictures, cap, limits, pages is None)


def _page_text(document: Any, number: int) -> str:
    page = document[number - 1]
    try:
        textpage = page.get_textpage()
        try:
            text = str(textpage.get_text_bounded())
        finally:
            textpage.close()
    finally:
        page.close()
    return neutralize(text.replace("\r\n", "\n").replace("\r", "\n"))


def _page_image(document: Any, number: int, limits: ToolLimits) -> Shown | str:
    """The page as an image within the limits, or why it is not shown."""
    page = document[number - 1]
    try:
        width, height = page.get_size()  # points: 72 a inch
        scale = min(PDF_DPI / 72, limits.max_image_edge / max(width, height, 1))
        bitmap = page.render(scale=scale)
        try:
            rendered = bitmap.to_pil()
            buffer = io.BytesIO()
            rendered.save(buffer, "PNG", optimize=True)
        finally:
            bitmap.close()
    finally:
        page.close()
    try:
        return fit_image(buffer.getvalue(), limits)
    except NotShown as why:
        return str(why)


def _pdf_result(
    shown_path: str,
    total: int,
    numbers: list[int],
    texts: list[str],
    pictures: list[Shown | str],
    cap: int,
    limits: ToolLimits,
    default_pages: bool,
) -> ToolOutput:
    # The text is held to the cap as a text file's is (whole pages, the first one cut if it
    # alone is over); the page images come beside it.
    sections = [
        f"--- page {n} of {total} ---\n{text if text.strip() else '[no text on this page]'}"
        for n, text in zip(numbers, texts, strict=True)
    ]

    def notes_after(shown: int) -> list[str]:
        follow = numbers[shown] if shown < len(numbers) else numbers[-1] + 1 if default_pages else total + 1
        if follow > total:
            return []
        why = " (cut by the output cap)" if shown < len(numbers) else ""
        upto = min(follow + limits.max_pdf_pages - 1, total)
        pages = _ranges(numbers[:shown])
        return [f'[… showing pages {pages} of {total}{why}. To read on, call read_file with pages="{follow}-{upto}".]']

    # Whole pages while they fit with the note after them; a first page over the cap alone is
    # cut, and the note says where the next one starts.
    shown = len(sections)
    notes = notes_after(shown)
    while shown > 1 and sum(len(x) + 1 for x in sections[:shown] + notes) > cap:
        shown -= 1
        notes = notes_after(shown)
    sections = sections[:shown]
    room = cap - sum(len(n) + 1 for n in notes)
    if sum(len(x) + 1 for x in sections + notes) > cap and room > len(CUT_NOTICE):
        sections = [cap_text(sections[0], room)]
    shown_pages = numbers[:shown]
    follow = bool(notes)
    body = cap_text("\n".join(sections + notes), cap)
    trace = _pdf_trace(shown_path, total, shown_pages, bool(pictures), follow)
    if not pictures:
        return ToolOutput(body, trace)
    content: list[Any] = []
    for section, picture in zip(sections, pictures, strict=False):
        content.append(types.TextContent(text=section))
        if isinstance(picture, Shown):
            content.append(picture.block())
        else:
            content.append(types.TextContent(text=f"[the page's image is not shown: {picture}]"))
    content += [types.TextContent(text=note) for note in notes]
    return ToolOutput(body, trace, content)


def _ranges(numbers: list[int]) -> str:
    """`1-3, 5` for [1, 2, 3, 5]."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def _pdf_trace(shown: str, total: int, numbers: list[int], images: bool, truncated: bool) -> dict[str, Any]:
    return {
        "path": shown,
        "kind": "pdf",
        "pages": total,
        "pages_shown": numbers,
        "page_images": images,
        "truncated": truncated,
    }


__all__ = [
    "NotShown",
    "Shown",
    "fit_image",
    "image_output",
    "is_media_read",
    "media_kind",
    "page_numbers",
    "pdf_output",
]
