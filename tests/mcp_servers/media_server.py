"""An MCP server whose tools answer in every kind of content block (issue 61), each with `_meta`:
text, an image (PNG), audio (WAV), an embedded blob resource (a PDF), an embedded text resource
and a resource link, in that order between two texts. The bytes are the files of
tests/fixtures/media/, so a test can compare what a model receives with them.

Run: `python media_server.py [--http PORT]` (stdio by default; HTTP binds to 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import mcp_types as types
from mcp.server import MCPServer

MEDIA = Path(__file__).resolve().parent.parent / "fixtures" / "media"


def encoded(name: str) -> str:
    return base64.b64encode((MEDIA / name).read_bytes()).decode("ascii")


def showcase_blocks() -> list[types.ContentBlock]:
    """Every kind of block, each with its own `_meta`."""
    return [
        types.TextContent(text="before the media", _meta={"toolroute.test/part": 1}),
        types.ImageContent(data=encoded("pixel.png"), mime_type="image/png", _meta={"toolroute.test/part": 2}),
        types.AudioContent(data=encoded("tone.wav"), mime_type="audio/wav", _meta={"toolroute.test/part": 3}),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(
                uri="file:///reports/q3.pdf", mime_type="application/pdf", blob=encoded("report.pdf")
            ),
            _meta={"toolroute.test/part": 4},
        ),
        types.EmbeddedResource(
            resource=types.TextResourceContents(
                uri="file:///reports/notes.md", mime_type="text/markdown", text="# Notes"
            ),
            _meta={"toolroute.test/part": 5},
        ),
        types.ResourceLink(
            uri="file:///reports/q4.pdf",
            name="q4.pdf",
            mime_type="application/pdf",
            size=4096,
            _meta={"toolroute.test/part": 6},
        ),
        types.TextContent(text="after the media", _meta={"toolroute.test/part": 7}),
    ]


def build() -> MCPServer:
    mcp = MCPServer("media", version="1.0")

    @mcp.tool()
    def showcase() -> list[types.ContentBlock]:
        """Text, an image, audio, an embedded PDF, an embedded text, a resource link, text."""
        return showcase_blocks()

    @mcp.tool()
    def picture() -> list[types.ContentBlock]:
        """One image, nothing else."""
        return [types.ImageContent(data=encoded("pixel.png"), mime_type="image/png")]

    @mcp.tool()
    def long_then_picture(chars: int) -> list[types.ContentBlock]:
        """A text of `chars` characters, an image, then a short text."""
        return [
            types.TextContent(text="x" * chars),
            types.ImageContent(data=encoded("pixel.png"), mime_type="image/png"),
            types.TextContent(text="the tail"),
        ]

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    mcp = build()
    if args.http:
        mcp.run("streamable-http", host="127.0.0.1", port=args.http, streamable_http_path="/mcp")
    else:
        mcp.run()


if __name__ == "__main__":
    main()
