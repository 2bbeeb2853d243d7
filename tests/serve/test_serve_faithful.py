"""The served gateway as a faithful, cheap relay (issue 56): an upstream's result reaches the client
as a client connected straight to the upstream sees it (blocks, structuredContent, isError text, the
result's `_meta`); a large catalogue's listing is built once per exposure, not per session (the
`mcp` client lists before a session's first call); and `serve --mcp-servers X` starts only X of
its config file. Real servers over stdio (testing/_gateway_upstream.py); nothing here is timed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types.methods
import pytest
from _serve_helpers import tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from mcp_types import SERVER_INFO_META_KEY

import toolroute.serve.doors
from toolroute import ToolRouter
from toolroute.mcp import McpGateway
from toolroute.serve import ServedTools, build_server

UPSTREAM = Path(__file__).resolve().parents[2] / "testing" / "_gateway_upstream.py"
CALLS = [
    ("echo", {"text": "hé\tllo"}),
    ("big", {"chars": 70_000}),
    ("fail", {"message": "no"}),
    ("tool_001", {"key": "k"}),
]


def upstream(tools: int) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(UPSTREAM), "--tools", str(tools)]}


def comparable(result: Any) -> dict[str, Any]:
    """The result but for what names the answering server (its serverInfo stamp)."""
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    meta = {k: v for k, v in (dumped.pop("_meta", None) or {}).items() if k != SERVER_INFO_META_KEY}
    return {**dumped, "_meta": meta}


async def answers(params: StdioServerParameters) -> list[dict[str, Any]]:
    async with Client(params) as client:
        return [comparable(await client.call_tool(name, args)) for name, args in CALLS]


def test_results_reach_the_client_as_the_upstream_sent_them(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"up": upstream(3)}}))
    direct = StdioServerParameters(command=sys.executable, args=upstream(3)["args"])
    args = ["serve", "--mcp-config", str(config), "--mcp-servers", "up", "--workspace", str(tmp_path)]
    served = StdioServerParameters(command=toolroute_exe(), args=args, env=tool_env())
    theirs, ours = anyio.run(answers, direct), anyio.run(answers, served)
    echo, big, fail, _ = theirs
    # The test means something only where the upstream sends what was dropped or changed before.
    assert echo["_meta"] == {"bench/echoed": 6} and big["structuredContent"]["chars"] == 70_000
    assert fail["isError"] is True
    assert ours == theirs


def test_a_large_catalogue_is_serialised_once_not_per_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions whose first request is a call (the SDK client lists first, implicitly): the 503
    tools' wire form is built once, and the SDK never serialises a listing of them itself."""
    builds: list[str] = []
    sdk_listings: list[int] = []
    build = toolroute.serve.doors.serialize_server_result
    sdk = mcp_types.methods.serialize_server_result

    def counted_build(method: str, version: str, data: Any, **kw: Any) -> Any:
        builds.append(version)
        return build(method, version, data, **kw)

    def counted_sdk(method: str, version: str, data: Any, **kw: Any) -> Any:
        # The server's serialisation only (the client checks what it receives with it too).
        if method == "tools/list" and data.get("tools") and sys._getframe(1).f_code.co_name == "_serialize":
            sdk_listings.append(len(data["tools"]))
        return sdk(method, version, data, **kw)

    monkeypatch.setattr(toolroute.serve.doors, "serialize_server_result", counted_build)
    monkeypatch.setattr(mcp_types.methods, "serialize_server_result", counted_sdk)
    gateway = McpGateway()
    gateway.add_server("up", upstream(500))
    with ToolRouter(gateway=gateway) as router:
        server = build_server(ServedTools(router, [], ["up"]))

        async def session(i: int) -> tuple[int, str]:
            async with Client(server) as client:
                result = await client.call_tool("echo", {"text": f"s{i}"})  # lists first, implicitly
                listed = await client.list_tools()
                return len(listed.tools), result.content[0].text

        async def sessions() -> list[tuple[int, str]]:
            out: list[tuple[int, str]] = []
            for i in range(6):
                out.append(await session(i))
            return out

        got = anyio.run(sessions)
    assert got == [(503, f"s{i}") for i in range(6)]
    assert len(builds) == 1, builds  # one protocol version, one build
    assert sdk_listings == []


def test_serve_starts_only_the_servers_it_names(tmp_path: Path) -> None:
    """A config file with two servers; `--mcp-servers up` must never start `other` (whose start
    leaves a marker file). Naming both starts both: the marker works."""
    marker = tmp_path / "other-started"
    other = {"command": "sh", "args": ["-c", f'touch "{marker}"; exec "{sys.executable}" "{UPSTREAM}" --tools 1']}
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"up": upstream(1), "other": other}}))

    def serve(names: str) -> str:
        args = ["serve", "--mcp-config", str(config), "--mcp-servers", names, "--workspace", str(tmp_path)]
        params = StdioServerParameters(command=toolroute_exe(), args=args, env=tool_env())

        async def go() -> str:
            async with Client(params) as client:
                text: str = (await client.call_tool("echo", {"text": "x"})).content[0].text  # type: ignore[union-attr]
                return text

        return anyio.run(go)

    assert serve("up") == "x"
    assert not marker.exists()
    serve("up,other")
    assert marker.exists()
