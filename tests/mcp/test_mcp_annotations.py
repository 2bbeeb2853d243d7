"""Upstream tool annotations (issue 23): `title`, `readOnlyHint`, `destructiveHint`,
`idempotentHint` and `openWorldHint` are kept as the server declared them and forwarded to
served clients unchanged; they count for the agent layer's scheduling only for a server whose
config says `trustAnnotations: true` (a read-only tool of such a server may run in a parallel
batch), since any server can declare anything. Real demo servers over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _agent_helpers import call
from _mcp_helpers import DEMO
from _serve_helpers import tool_env, toolroute_exe
from mcp import Client, StdioServerParameters

from toolroute import ToolRouter
from toolroute.agent import RouterToolExecutor, ToolCallRunner
from toolroute.errors import ToolRegistrationError
from toolroute.mcp import McpGateway


def annotated(name: str, **options: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [DEMO, "--name", name, "--annotated"], **options}


def test_served_clients_get_the_annotations_as_declared(tmp_path: Path) -> None:
    upstream = annotated("notes")
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"notes": upstream}}))
    direct = StdioServerParameters(command=upstream["command"], args=upstream["args"])
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "notes"],
        env=tool_env(),
    )

    async def listing(params: StdioServerParameters) -> dict[str, Any]:
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            return {t.name.rsplit("_", 1)[-1] if t.name.endswith(("lookup", "wipe")) else t.name: t for t in tools}

    theirs, ours = anyio.run(listing, direct), anyio.run(listing, served)
    for name in ("lookup", "wipe"):
        assert theirs[name].annotations is not None
        assert ours[name].annotations == theirs[name].annotations, name


@pytest.mark.parametrize("trusted", [True, False])
def test_hints_count_for_scheduling_only_when_trusted(trusted: bool) -> None:
    gateway = McpGateway()
    gateway.add_server("notes", annotated("notes", trustAnnotations=trusted))
    router = ToolRouter(gateway=gateway)
    try:
        router.get_all_tools([], ["notes"])
        names = {n.rsplit("_", 1)[-1]: n for n in gateway.global_tool_names()}
        executor = RouterToolExecutor(router)
        assert executor.traits(names["lookup"]).read_only is trusted
        assert executor.traits(names["wipe"]).read_only is False  # declared destructive
        groups = ToolCallRunner(executor).plan([call(names["lookup"], key="a"), call(names["lookup"], key="b")])
        assert [len(g) for g in groups] == ([2] if trusted else [1, 1])
        assert router.invoke(names["lookup"], {"key": "k"}) == "notes:k"
    finally:
        router.close()


def test_trust_annotations_must_be_a_boolean() -> None:
    with pytest.raises(ToolRegistrationError, match="trustAnnotations"):
        McpGateway().add_server("notes", annotated("notes", trustAnnotations="yes"))
