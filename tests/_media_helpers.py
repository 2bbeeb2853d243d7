"""Shared by the media tests (issue 61): the media server's bytes, a router over it, the trail of
what a model received, and a recording stand-in for the providers' HTTP APIs on 127.0.0.1.

A "trail" reads what a model was sent as the kinds it saw, in order: `IMG`, `WAV`, `PDF` for
bytes identical to the server's files; for text, the markers it holds in order (`B` and `A` the
texts before and after, `N` the embedded text resource, `L` the resource link, and `i`, `w`, `p`
where the image, the audio or the PDF is named in words: marked where it went, or said not to
be passed on).
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.mcp.gateway import McpGateway

TESTS = Path(__file__).resolve().parent
MEDIA = TESTS / "fixtures" / "media"
MEDIA_SERVER = str(TESTS / "mcp_servers" / "media_server.py")
PNG = (MEDIA / "pixel.png").read_bytes()
WAV = (MEDIA / "tone.wav").read_bytes()
PDF = (MEDIA / "report.pdf").read_bytes()
NAMES = {PNG: "IMG", WAV: "WAV", PDF: "PDF"}
MARKERS = [
    ("before the media", "B"),
    ("image (image/png", "i"),
    ("audio (audio/wav", "w"),
    ("resource file:///reports/q3.pdf", "p"),
    ("# Notes", "N"),
    ("resource link file:///reports/q4.pdf", "L"),
    ("after the media", "A"),
]
NOT_PASSED = "not passed on"

Item = tuple[str, Any]  # ("text", str) or ("bytes", bytes)


def media_stdio() -> dict[str, Any]:
    """An `mcpServers` entry running the media server over stdio."""
    return {"command": sys.executable, "args": [MEDIA_SERVER]}


@contextmanager
def media_router(workspace: Path) -> Iterator[ToolRouter]:
    router = ToolRouter(
        gateway=McpGateway({"mcpServers": {"media": media_stdio()}}), context=BuiltInToolContext(workspace)
    )
    try:
        yield router
    finally:
        router.close()


def trail(items: Sequence[Item]) -> list[str]:
    out: list[str] = []
    for kind, value in items:
        if kind == "bytes":
            out.append(NAMES.get(value, f"?{len(value)} bytes"))
        else:
            out += [mark for _, mark in sorted((value.find(m), mark) for m, mark in MARKERS if m in value)]
    return out


def said_not_passed(items: Sequence[Item], marker: str) -> bool:
    """Whether the text naming `marker`'s media says it was not passed on (and why)."""
    words = dict((mark, m) for m, mark in MARKERS)[marker]
    for kind, value in items:
        if kind == "text" and words in value:
            line = next(line for line in value.split("\n") if words in line)
            return NOT_PASSED in line and len(line.split(NOT_PASSED, 1)[1]) > 10
    return False


def make_pdf(pages: Sequence[str]) -> bytes:
    """A PDF of one line of text a page (3-point Helvetica, letter size: 300 characters fit on it),
    made by pdfium itself."""
    import ctypes
    import io

    import pypdfium2
    import pypdfium2.raw as raw

    pdf = pypdfium2.PdfDocument.new()
    for text in pages:
        page = pdf.new_page(612, 792)
        obj = raw.FPDFPageObj_NewTextObj(pdf.raw, b"Helvetica", ctypes.c_float(3))
        data = ctypes.create_string_buffer((text + "\0").encode("utf-16-le"))
        raw.FPDFText_SetText(obj, ctypes.cast(data, ctypes.POINTER(raw.FPDF_WCHAR)))
        raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 36, 700)
        raw.FPDFPage_InsertObject(page.raw, obj)
        raw.FPDFPage_GenerateContent(page.raw)
        page.close()
    out = io.BytesIO()
    pdf.save(out)
    pdf.close()
    return out.getvalue()


def data_url_bytes(url: str) -> bytes:
    head, _, data = url.partition(",")
    assert head.startswith("data:") and head.endswith(";base64"), head
    return base64.b64decode(data)


# ---- a recording stand-in for the providers' HTTP APIs ---------------------------------------

CHAT_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "scripted",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "seen"}}],
}
RESPONSES_REPLY = {
    "id": "r",
    "object": "response",
    "created_at": 0,
    "model": "scripted",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "m",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "seen", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
ANTHROPIC_REPLY = {
    "id": "m",
    "type": "message",
    "role": "assistant",
    "model": "scripted",
    "content": [{"type": "text", "text": "seen"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
REPLIES = {"/v1/chat/completions": CHAT_REPLY, "/v1/responses": RESPONSES_REPLY, "/v1/messages": ANTHROPIC_REPLY}


@contextmanager
def recording_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An HTTP server on 127.0.0.1 answering the providers' endpoints with a canned reply and
    keeping each request's JSON body: (base URL, bodies). What the SDK sent is what the model
    would have received."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            bodies.append(json.loads(self.rfile.read(length)))
            reply = json.dumps(REPLIES[self.path]).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def first(items: Sequence[Any], test: Callable[[Any], bool]) -> Any:
    return next(item for item in items if test(item))
