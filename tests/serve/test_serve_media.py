"""`toolroute serve` passes every content block of an upstream result unchanged, `_meta` included
(issue 61): the same JSON-RPC, sent over stdio to the media server itself and to toolroute
serving it, answers with the same `content`, compared as the JSON each side wrote (order,
keys, every base64 character). And read_file's images and PDF pages reach a served client as
image blocks."""

from __future__ import annotations

import base64
import json
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from _media_helpers import MEDIA_SERVER, PDF, PNG
from _serve_helpers import tool_env, toolroute_exe
from mcp import Client, StdioServerParameters

HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}
READY = {"jsonrpc": "2.0", "method": "notifications/initialized"}
DEADLINE = 60.0  # seconds for one exchange, start-up included


def wire_result(command: list[str], tool: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The `result` of one `tools/call` as the server wrote it, parsed with its keys in order."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
        for message in (HELLO, READY, call):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            if not selector.select(timeout=max(end - time.monotonic(), 0)):
                break
            line = proc.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            if message.get("id") == 2:
                result: dict[str, Any] = message["result"]
                return result
        raise AssertionError(f"no answer to tools/call from {command}")
    finally:
        proc.kill()
        proc.wait(10)


def test_every_block_and_its_meta_pass_through_serve_as_the_server_wrote_them(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"media": {"command": sys.executable, "args": [MEDIA_SERVER]}}}))
    direct = wire_result([sys.executable, MEDIA_SERVER], "showcase")
    served = wire_result(
        [toolroute_exe(), "serve", "--mcp-config", str(config), "--mcp-servers", "media"], "showcase", tool_env()
    )

    def wire(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    assert [block["type"] for block in direct["content"]] == [
        "text",
        "image",
        "audio",
        "resource",
        "resource",
        "resource_link",
        "text",
    ]
    assert [block["_meta"] for block in direct["content"]] == [{"toolroute.test/part": n} for n in range(1, 8)]
    for mine, theirs in zip(served["content"], direct["content"], strict=True):
        assert wire(mine) == wire(theirs)  # keys, order, every character, _meta included
    assert wire(served["content"]) == wire(direct["content"])
    assert base64.b64decode(served["content"][1]["data"]) == PNG
    assert served.get("isError", False) is False


def test_read_file_images_and_pdf_pages_reach_a_served_client_as_image_blocks(tmp_path: Path) -> None:
    (tmp_path / "pixel.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    params = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--functions", "read_file", "--workspace", str(tmp_path)],
        env=tool_env(),
    )

    async def go() -> tuple[Any, Any, Any]:
        async with Client(params) as client:
            image = await client.call_tool("read_file", {"path": "pixel.png"})
            pages = await client.call_tool("read_file", {"path": "report.pdf", "page_images": True})
            outside = await client.call_tool("read_file", {"path": "/etc/hostname"})
            return image, pages, outside

    image, pages, outside = anyio.run(go)
    assert [b.type for b in image.content] == ["text", "image"] and not image.is_error
    assert base64.b64decode(image.content[1].data) == PNG and image.content[1].mime_type == "image/png"
    assert [b.type for b in pages.content] == ["text", "image", "text", "image"]
    assert "Quarterly report, page one" in pages.content[0].text
    assert outside.is_error and "outside the allowed roots" in outside.content[0].text
