"""A low-level `mcp.server.Server` that pages tools/list two tools at a time."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

NAMES = ["p1", "p2", "p3", "p4", "p5"]
PAGE = 2


async def on_list_tools(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    start = int(params.cursor) if params and params.cursor else 0
    nxt = str(start + PAGE) if start + PAGE < len(NAMES) else None
    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    tools = [types.Tool(name=n, description=f"tool {n}", input_schema=schema) for n in NAMES[start : start + PAGE]]
    return types.ListToolsResult(tools=tools, next_cursor=nxt)


async def on_call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=f"paged:{params.name}:{params.arguments}")])


server = Server("paged", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
