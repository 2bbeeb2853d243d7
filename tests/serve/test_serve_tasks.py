"""Tasks through `toolroute serve` (issue 60). The installed `mcp` SDK implements no tasks (its
2025-11-25 task types exist, no server or client handles them; the 2026-07-28 Tasks extension is
absent), so the gateway offers none and passes none: what is tested is that it says so cleanly.
An upstream that runs a tool only as a task (`task_server.py`, bare JSON-RPC) is refused with a
plain tool error naming the reason, not the SDK's error text; the gateway answers `tasks/get`
with -32601 (a server that does not offer tasks) and a task-augmented call as a plain call."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS
from _serve_helpers import tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

TASK_SERVER = str(SERVERS / "task_server.py")


def served(tmp_path: Path) -> StdioServerParameters:
    entry = {"command": sys.executable, "args": [TASK_SERVER], "protocol": "2026-07-28"}
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"jobs": entry}}))
    args = ["serve", "--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "jobs"]
    return StdioServerParameters(command=toolroute_exe(), args=args, env=tool_env())


async def calls(target: Any, mode: str) -> list[Any]:
    out: list[Any] = []
    async with Client(target, mode=mode) as client:
        for name, arguments in (("quick", {"text": "hi"}), ("long_job", {})):
            try:
                result = await client.call_tool(name, arguments)
            except MCPError as exc:
                out.append(("error", exc.error.code))
                continue
            out.append((result.is_error, [c.text for c in result.content]))  # type: ignore[union-attr]
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_task_only_tool_is_refused_plainly(tmp_path: Path, mode: str) -> None:
    """Directly, the SDK's client (which declares no tasks) gets -32021 for the task-only tool;
    through the gateway, a client of either era gets a tool error that says why, and the
    server's other tool runs."""
    direct = StdioServerParameters(command=sys.executable, args=[TASK_SERVER])
    assert anyio.run(calls, direct, "auto") == [(False, ["hi"]), ("error", types.MISSING_REQUIRED_CLIENT_CAPABILITY)]
    quick, job = anyio.run(calls, served(tmp_path), mode)
    assert quick == (False, ["hi"])
    assert job == (
        True,
        [
            "MCP server 'jobs' runs 'long_job' only as a task (the MCP Tasks extension), "
            "which this gateway does not pass through"
        ],
    )


async def task_requests(target: Any) -> tuple[Any, Any]:
    async with Client(target, mode="legacy") as client:
        assert client.server_capabilities.tasks is None
        with pytest.raises(MCPError) as refused:
            await client.session.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="task-1")), types.GetTaskResult
            )
        # A task-augmented call to a server that offers no tasks is processed as a plain call.
        params = types.CallToolRequestParams(
            name="quick", arguments={"text": "now"}, task=types.TaskMetadata(ttl=60000)
        )
        result = await client.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)
        return refused.value.error.code, [c.text for c in result.content]  # type: ignore[union-attr]


def test_the_gateway_offers_no_tasks_and_runs_a_task_augmented_call_plainly(tmp_path: Path) -> None:
    """The gateway declares no tasks capability and answers `tasks/get` with -32601, so no
    upstream's task, of any tenant, is reachable through it; `params.task` is ignored."""
    assert anyio.run(task_requests, served(tmp_path)) == (types.METHOD_NOT_FOUND, ["now"])
