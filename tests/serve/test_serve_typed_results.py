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
import pytest
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


def test_function_tools_with_a_declared_shape_are_typed_as_the_sdk_types_its_own() -> None:
    """A function tool returning a pydantic model or a TypedDict is listed with the output schema
    the SDK's `MCPServer` gives the same function, and returns the same structured content beside
    its text; one without a shape returns text only; a value that breaks its declared shape is an
    error (as the SDK's server makes it), never structure a client's schema check would refuse."""
    import _typed_tools as typed
    from mcp.server import MCPServer

    sdk = MCPServer("sdk")
    for fn in (typed.forecast, typed.totals):
        sdk.tool()(fn)
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--modules", "_typed_tools", "--functions", "forecast,totals,plain,liar"],
        env=tool_env(),
    )
    calls = {"forecast": {"city": "Oslo"}, "totals": {"values": [1.5, 2]}, "plain": {"x": 4}, "liar": {"x": 1}}

    async def listed_and_called(target: object, names: list[str]) -> dict[str, tuple[Any, Any]]:
        async with Client(target) as client:  # type: ignore[arg-type]
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return {n: (tools[n], await client.call_tool(n, calls[n])) for n in names}

    theirs = anyio.run(listed_and_called, sdk, ["forecast", "totals"])
    ours = anyio.run(listed_and_called, served, list(calls))
    for name in ("forecast", "totals"):
        (their_tool, their_result), (our_tool, our_result) = theirs[name], ours[name]
        assert their_tool.output_schema and our_tool.output_schema == their_tool.output_schema
        assert their_result.structured_content and our_result.structured_content == their_result.structured_content
        assert not our_result.is_error
        assert json.loads(our_result.content[0].text) == our_result.structured_content
    plain_tool, plain_result = ours["plain"]
    assert plain_tool.output_schema is None and plain_result.structured_content is None
    assert plain_result.content[0].text == "8"
    liar_tool, liar_result = ours["liar"]
    assert liar_tool.output_schema == ours["forecast"][0].output_schema
    assert liar_result.is_error and liar_result.structured_content is None
    assert "does not match the declared Forecast: city: Field required" in liar_result.content[0].text


def test_a_typed_function_tool_keeps_its_structure_in_the_trace_in_process() -> None:
    """In the library the model still reads the text; the structure rides in the trace."""
    import _typed_tools as typed

    from toolroute import ToolExecutionError, ToolRouter

    router = ToolRouter()
    router.register_all(typed.TYPED)
    out = router.execute("forecast", {"city": "Rome"})
    assert json.loads(out.text) == {"city": "Rome", "celsius": 21.5, "tags": ["dry"]}
    assert out.trace == {"structured_content": {"city": "Rome", "celsius": 21.5, "tags": ["dry"]}}
    with pytest.raises(ToolExecutionError, match="does not match the declared Forecast"):
        router.execute("liar", {"x": 1})


def test_a_typed_upstream_result_past_the_budget_is_an_error_not_a_broken_result(tmp_path: Path) -> None:
    """Past the gateway's result budget the text is cut and the structure with it; a served
    client would refuse a typed tool's result without its structure, so it is told why instead.
    Within the budget the same tool passes through typed."""
    from toolroute.mcp.results import DEFAULT_MAX_RESULT_CHARS

    upstream = demo_stdio("long")
    upstream["args"] = [*upstream["args"], "--long"]
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"long": upstream}}))
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "long"],
        env=tool_env(),
    )

    async def go() -> tuple[Any, Any, Any]:
        async with Client(served) as client:
            (tool,) = [t for t in (await client.list_tools()).tools if t.name.endswith("blob")]
            small = await client.call_tool(tool.name, {"chars": 10})
            big = await client.call_tool(tool.name, {"chars": DEFAULT_MAX_RESULT_CHARS + 5000})
            return tool, small, big

    tool, small, big = anyio.run(go)
    assert tool.output_schema is not None
    assert not small.is_error and small.structured_content == {"data": "x" * 10}
    assert big.is_error and big.structured_content is None
    text = big.content[0].text
    assert "structured result was cut with the text" in text and len(text) < DEFAULT_MAX_RESULT_CHARS + 1000
