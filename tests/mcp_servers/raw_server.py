"""A hostile MCP server written byte by byte with the standard library, so it can send what no SDK
would: JSON-RPC 2.0 over stdio (one message a line) or over HTTP (`--http PORT`, 127.0.0.1 only,
stateless: every POST answered on its own, as JSON or, for `storm`, as an SSE stream).

It answers the `initialize` handshake, `tools/list` (`--tools N` tools in one page; default 3)
and `tools/call` of:
- `say`: a healthy tool (`raw:TEXT`);
- `badutf8`: a reply whose bytes are not valid UTF-8;
- `notjson`: a reply line that is not JSON at all;
- `deep`: a reply nested `--depth` levels deep (default 100,000);
- `storm`: `--storm` `notifications/tools/list_changed` (default 20,000), then a healthy reply.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}
BASE = ["say", "badutf8", "notjson", "deep", "storm"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--tools", type=int, default=0, help="this many more tools in the listing")
    parser.add_argument("--depth", type=int, default=100_000)
    parser.add_argument("--storm", type=int, default=20_000)
    return parser.parse_args()


ARGS = parse_args()
CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


def tools() -> list[dict[str, Any]]:
    listed = [{"name": name, "description": f"The {name} probe.", "inputSchema": TEXT} for name in BASE]
    listed += [
        {"name": f"t{i:06d}", "description": f"Filler tool number {i} of a huge listing.", "inputSchema": TEXT}
        for i in range(ARGS.tools)
    ]
    return listed


def reply(rid: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def text(rid: Any, value: str) -> bytes:
    return reply(rid, {"content": [{"type": "text", "text": value}], "isError": False})


def answer(message: dict[str, Any]) -> tuple[list[bytes], bytes | None]:
    """The notifications to send first and the reply (None for a notification)."""
    rid, method = message.get("id"), message.get("method")
    if rid is None:
        return [], None
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        caps = {"tools": {"listChanged": True}}
        return [], reply(
            rid, {"protocolVersion": version, "capabilities": caps, "serverInfo": {"name": "raw", "version": "1"}}
        )
    if method == "tools/list":
        return [], reply(rid, {"tools": tools()})
    if method == "ping":
        return [], reply(rid, {})
    if method != "tools/call":
        error = {"code": -32601, "message": f"unknown method {method}"}
        return [], json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode()
    name = message["params"]["name"]
    if name == "badutf8":
        return [], text(rid, "ok").replace(b'"ok"', b'"\xff\xfe\xc3("')
    if name == "notjson":
        return [], b"this is not JSON {"
    if name == "deep":
        return [], text(rid, "x")[:-1] + b',"deep":' + b"[" * ARGS.depth + b"]" * ARGS.depth + b"}}"
    if name == "storm":
        return [CHANGED] * ARGS.storm, text(rid, "stormed")
    return [], text(rid, "raw:" + str(message["params"].get("arguments", {}).get("text", "")))


def serve_stdio() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        notes, rep = answer(json.loads(line))
        for note in notes:
            out.write(note + b"\n")
        if rep is not None:
            out.write(rep + b"\n")
        out.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        notes, rep = answer(json.loads(body))
        if rep is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if notes:  # an SSE stream: the notifications, then the reply
            payload = b"".join(b"event: message\ndata: " + m + b"\n\n" for m in [*notes, rep])
            kind = "text/event-stream"
        else:
            payload, kind = rep, "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.do_GET()


if __name__ == "__main__":
    if ARGS.http:
        ThreadingHTTPServer(("127.0.0.1", ARGS.http), Handler).serve_forever()
    else:
        serve_stdio()
