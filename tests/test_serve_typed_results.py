"""Typed results through the gateway (issue 23, part 2): an upstream tool's `outputSchema` reaches
the served client in `tools/list`, and its `structuredContent` in the `tools/call` result,
unchanged; compared with what a client connected straight to the upstream server sees. Real
servers over stdio: the demo server (the SDK's `MCPServer`, which declares an output schema for a
typed return value) behind `toolroute serve`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from _mcp_helpers import demo_stdio
from _serve_helpers import tool_env, toolroute_exe
from mcp import Client, StdioServerParameters


async def listing_and_call(params: StdioServerParameters, name_part: str) -> tuple[Any, Any]:
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        (tool,) = [t for t in tools if t.name.endswith(name_part)]
        result = await client.call_tool(tool.name, {"a": 2, "b": 3})
        return tool, result


def test_output_schema_and_structured_content_pass_through_unchanged(tmp_path: Path) -> None:
    upstream = demo_stdio("typed")
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"typed": upstream}}))
    direct = StdioServerParameters(command=upstream["command"], args=upstream["args"])
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "typed"],
        env=tool_env(),
    )
    their_tool, their_result = anyio.run(listing_and_call, direct, "add")
    our_tool, our_result = anyio.run(listing_and_call, served, "add")
    assert their_tool.output_schema, "the upstream declares an output schema (or the test means nothing)"
    assert our_tool.output_schema == their_tool.output_schema
    assert their_result.structured_content is not None
    assert our_result.structured_content == their_result.structured_content
    assert not our_result.is_error and our_result.content[0].text == their_result.content[0].text


def test_a_tool_without_an_output_schema_has_none_served(tmp_path: Path) -> None:
    """The built-ins declare none: nothing is invented for them."""
    (tmp_path / "f.txt").write_text("x\n")
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--workspace", str(tmp_path), "--functions", "read_file"],
        env=tool_env(),
    )

    async def go() -> tuple[Any, Any]:
        async with Client(served) as client:
            (tool,) = (await client.list_tools()).tools
            return tool, await client.call_tool("read_file", {"path": "f.txt"})

    tool, result = anyio.run(go)
    assert tool.output_schema is None and result.structured_content is None and not result.is_error


def test_a_hostile_output_schema_is_bounded_and_made_visible() -> None:
    """Past the schema budget the declared shape is dropped (the tool itself stays listed);
    control characters a model could be shown are made visible."""
    import mcp_types as types

    from toolroute.mcp.projection import output_schema

    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(100):
        node["properties"] = {"x": {"type": "object"}}
        node = node["properties"]["x"]
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(6000)}}
    base = {"name": "t", "input_schema": {"type": "object"}}
    assert output_schema(types.Tool(**base, output_schema=deep)) is None
    assert output_schema(types.Tool(**base, output_schema=wide)) is None
    sneaky = {"type": "object", "title": "ok\x1b[2Jcleared"}
    shown = output_schema(types.Tool(**base, output_schema=sneaky))
    assert shown is not None and "\x1b" not in json.dumps(shown, ensure_ascii=False)
    assert output_schema(types.Tool(**base)) is None
