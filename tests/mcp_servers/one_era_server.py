"""A stdio MCP server that speaks one protocol era only, written on bare JSON-RPC (newline
framed) so it does exactly what the test needs:

- `--era legacy`: the `initialize` handshake (2025-11-25); `server/discover` is never answered
  (like hand-written servers that drop unknown methods), so a client that probes waits;
- `--era modern`: 2026-07-28 only: `server/discover` answers, `initialize` is refused with
  -32022 naming the modern version (what a modern-only server says).

Every method received is appended to `--log FILE`, one per line, so a test can count probes
across restarts. Tools: `echo(text)` and `crash()` (exits mid-call, to force a reconnect).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back, tagged with the era.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "crash", "description": "Exit in the middle of the call.", "inputSchema": {"type": "object"}},
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    capabilities = {"tools": {"listChanged": False}}
    info = {"name": f"one-era-{args.era}", "version": "1.0"}

    def send(message: dict) -> None:
        if args.era == "modern" and "result" in message:
            # 2026-07-28 results say whether they are complete and how they may be cached.
            message["result"].update(resultType="complete", ttlMs=0, cacheScope="private")
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        method, request_id = message.get("method"), message.get("id")
        with open(args.log, "a") as log:
            log.write(f"{method}\n")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            if args.era == "modern":
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {
                            "code": -32022,
                            "message": "unsupported protocol version",
                            "data": {"supported": [MODERN], "requested": LEGACY},
                        },
                    }
                )
            else:
                result = {"protocolVersion": LEGACY, "capabilities": capabilities, "serverInfo": info}
                send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "server/discover":
            if args.era == "modern":
                result = {"supportedVersions": [MODERN], "capabilities": capabilities, "serverInfo": info}
                send({"jsonrpc": "2.0", "id": request_id, "result": result})
            # legacy: never answered
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            params = message.get("params") or {}
            if params.get("name") == "crash":
                os._exit(3)
            text = f"{args.era}:{(params.get('arguments') or {}).get('text', '')}"
            result = {"content": [{"type": "text", "text": text}], "isError": False}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
