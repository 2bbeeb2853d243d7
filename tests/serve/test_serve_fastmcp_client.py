"""The MCP tool surface through `toolroute serve`, as the fastmcp client sees it (issue 23, part 2):
output schemas, annotations, structured content (and fastmcp's typed `.data` decoded from it) and
progress reports of an upstream tool are what the same client sees connected straight to the
upstream server. Real processes over stdio: the demo server (the SDK's `MCPServer`) upstream,
`toolroute serve` in front of it, fastmcp's own `Client` and `StdioTransport`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from _mcp_helpers import demo_stdio
from _serve_helpers import tool_env, toolroute_exe
from fastmcp import Client
from fastmcp.client.transports import StdioTransport


async def what_the_client_sees(transport: StdioTransport) -> dict[str, Any]:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with Client(transport) as client:
        tools = await client.list_tools()

        def named(suffix: str) -> Any:
            (tool,) = [t for t in tools if t.name.endswith(suffix)]
            return tool

        add, lookup, steps = named("add"), named("lookup"), named("steps").name
        typed = await client.call_tool(add.name, {"a": 2, "b": 3})
        stepped = await client.call_tool(steps, {"count": 4}, progress_handler=on_progress)
        return {
            "output_schema": add.output_schema,
            "annotations": lookup.annotations.model_dump(exclude_none=True) if lookup.annotations else None,
            "title": lookup.title,
            "structured": typed.structured_content,
            "data": typed.data,
            "text": [c.text for c in typed.content],  # type: ignore[union-attr]
            "steps": [c.text for c in stepped.content],  # type: ignore[union-attr]
            "progress": reports,
        }


def test_the_fastmcp_client_sees_the_upstream_tool_surface_unchanged(tmp_path: Path) -> None:
    upstream = demo_stdio("demo")
    upstream["args"] = [*upstream["args"], "--annotated", "--long"]  # tools with annotations, progress
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"demo": upstream}}))
    direct = StdioTransport(command=upstream["command"], args=upstream["args"])
    served = StdioTransport(
        command=toolroute_exe(),
        args=["serve", "--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "demo"],
        env=tool_env(),
    )
    theirs = anyio.run(what_the_client_sees, direct)
    ours = anyio.run(what_the_client_sees, served)
    # The upstream really declares each of these (or the comparison means nothing).
    assert theirs["output_schema"] and theirs["structured"] and theirs["annotations"]
    assert theirs["annotations"].get("read_only_hint") is True
    assert len(theirs["progress"]) == 4
    assert ours == theirs
