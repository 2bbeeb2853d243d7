"""An MCP server (the SDK's `MCPServer`) whose listings carry caching hints (2026-07-28,
`ttlMs` / `cacheScope`), set by `--ttl MS` and `--scope public|private`; a handshake-era client
gets none (the SDK leaves them out of that era's results).

Run: `python caching_server.py [--ttl 45000] [--scope public] [--http PORT]` (HTTP binds to
127.0.0.1 only). Offers the tool `echo(text)`, the prompt `greet` and the resource `note://one`.
"""

from __future__ import annotations

import argparse
from typing import Literal

from mcp.server import MCPServer
from mcp.server.caching import CacheHint


def build(ttl: int, scope: Literal["public", "private"]) -> MCPServer:
    hint = CacheHint(ttl_ms=ttl, scope=scope)
    server = MCPServer(
        "caching",
        cache_hints={
            "tools/list": hint,
            "prompts/list": hint,
            "resources/list": hint,
            "resources/templates/list": hint,
            "resources/read": hint,
        },
    )

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.prompt()
    def greet(who: str) -> str:
        """A greeting."""
        return f"Say hello to {who}."

    @server.resource("note://one")
    def note() -> str:
        """A note."""
        return "one"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttl", type=int, default=45000)
    parser.add_argument("--scope", choices=["public", "private"], default="public")
    parser.add_argument("--http", type=int, default=None)
    args = parser.parse_args()
    server = build(args.ttl, args.scope)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http, streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
