"""`toolroute serve` as an MCP gateway: tools of configured upstream servers, still allowlisted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from _serve_helpers import run_cli, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters


@pytest.fixture
def config(tmp_path: Path) -> Path:
    server = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"clock": server, "clock2": server}}))
    return path


def tool_names(config: Path, service: str) -> list[str]:
    proc = run_cli("tools", "--mcp-config", str(config), "--mcp-servers", service)
    assert proc.returncode == 0, proc.stderr
    return [t["function"]["name"] for t in json.loads(proc.stdout)]


def test_upstream_tools_are_served_and_other_upstreams_refused(config: Path) -> None:
    served_names = tool_names(config, "clock")
    other_names = tool_names(config, "clock2")
    assert served_names and other_names
    assert not set(served_names) & set(other_names)  # the gateway keeps the services apart
    # serve starts only the server it names (issue 56): its tools keep their own names, since no
    # other server's tools are there to share them; the other server's names are refused.
    own = sorted(n.removeprefix("clock_") for n in served_names)
    params = StdioServerParameters(
        command=toolroute_exe(), args=["serve", "--mcp-config", str(config), "--mcp-servers", "clock"], env=tool_env()
    )

    async def go() -> tuple:
        async with Client(params) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            now = await client.call_tool("get_current_time", {"timezone": "UTC"})
            refused = [await client.call_tool(name, {"timezone": "UTC"}) for name in other_names]
            return listed, now, refused

    listed, now, refused = anyio.run(go)
    assert sorted(listed) == own and "get_current_time" in listed
    assert not now.is_error and "UTC" in now.content[0].text
    for name, result in zip(other_names, refused, strict=True):
        assert result.is_error and result.content[0].text == f"tool {name!r} is not served by this server"


def test_call_routes_to_an_upstream_server(config: Path) -> None:
    (current,) = [n for n in tool_names(config, "clock") if "get_current_time" in n]
    proc = run_cli("call", current, '{"timezone": "UTC"}', "--mcp-config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "UTC" in proc.stdout
