"""The upstream MCP server of the gateway load benchmark (benches/bench_gateway_load.py) and the
gateway fidelity tests (tests/serve/test_serve_faithful.py).

    python testing/_gateway_upstream.py [--http PORT] [--tools N]

On the SDK's low-level `Server` (as toolroute serves), so the upstream itself costs little and the
gateways' own costs show. Tools: `echo` (its text back, with a `_meta`), `big` (a result of `chars`
characters, as blocks and as structuredContent, with a `_meta`), `fail` (an isError result), and
`N` filler tools with schemas (for the listing of a large catalogue). Over stdio by default; with
`--http` streamable HTTP on 127.0.0.1 (the "direct" side).
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server


def filler(i: int) -> dict[str, Any]:
    return {
        "name": f"tool_{i:03d}",
        "description": f"Filler tool number {i}: looks up a record by key and returns it as text.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "The record's key."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "required": ["key"],
        },
        "annotations": {"readOnlyHint": True},
    }


OWN = [
    {"name": "echo", "description": "Echo a text.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},  # noqa: E501
    {"name": "big", "description": "A result of `chars` characters.", "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}, "required": ["chars"]}},  # noqa: E501
    {"name": "fail", "description": "An error result.", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},  # noqa: E501
]  # fmt: skip


def build(tools: int) -> Server[Any]:
    # Models, as an SDK server's handlers answer (a dict would have to carry the 2026 era's envelope).
    listing = types.ListToolsResult.model_validate({"tools": OWN + [filler(i) for i in range(tools)]})

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return listing

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult.model_validate(answer(params))

    def answer(params: types.CallToolRequestParams) -> dict[str, Any]:
        args = params.arguments or {}
        if params.name == "echo":
            text = str(args.get("text", ""))
            return {"content": [{"type": "text", "text": text}], "_meta": {"bench/echoed": len(text)}}
        if params.name == "big":
            chars = int(args.get("chars", 0))
            body = ("0123456789abcdef" * (chars // 16 + 1))[:chars]
            return {
                "content": [{"type": "text", "text": body}],
                "structuredContent": {"chars": chars, "head": body[:32]},
                "_meta": {"bench/chars": chars},
            }
        if params.name == "fail":
            return {"content": [{"type": "text", "text": f"failed: {args.get('message', '')}"}], "isError": True}
        return {"content": [{"type": "text", "text": f"{params.name}: {args.get('key', '')}"}]}

    schemas = {tool.name: tool.input_schema for tool in listing.tools}
    # The input schemas given straight (as toolroute gives its own): without them the SDK lists
    # every tool again at each call of the 2026 era, to look for `x-mcp-header` parameters.
    return Server(
        "bench-upstream",
        version="1.0",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=schemas.get,
    )


async def serve_stdio(tools: int) -> None:
    server = build(tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(tools: int, port: int) -> None:
    import uvicorn

    app = build(tools).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--tools", type=int, default=500)
    args = parser.parse_args()
    if args.http is not None:
        serve_http(args.tools, args.http)
    else:
        anyio.run(serve_stdio, args.tools)


if __name__ == "__main__":
    main()
