"""A served client's roots reach an upstream that asks for them during that client's call (issue
60), routed as elicitation is: the same roots and result as with the client connected straight
to the upstream, over stdio and HTTP, client and upstream of either era; a client without roots
is refused, never given another's; two tenants each give only their own. Real processes: the
SDK's client, `toolroute serve`, the SDK's `MCPServer` (`asking_server.py`'s `where`)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS
from _serve_helpers import alice_and_bob_served, http_server, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

ASKING = str(SERVERS / "asking_server.py")


def upstream(era: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [ASKING], "protocol": era}


def serve_args(folder: Path, era: str) -> list[str]:
    (folder / "servers.json").write_text(json.dumps({"mcpServers": {"asking": upstream(era)}}))
    return ["--mcp-config", str(folder / "servers.json"), "--mcp-servers", "asking"]


def roots_of(user: str) -> Any:
    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///home/{user}/project", name=user)])

    return roots


async def where(target: Any, mode: str, user: str | None, tag: str) -> Any:
    callback = None if user is None else roots_of(user)
    async with Client(target, mode=mode, list_roots_callback=callback) as client:
        (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("where")]
        try:
            result = await client.call_tool(name, {"tag": tag})
        except MCPError as exc:
            return ("error", exc.error.code)
        return (result.is_error, result.content[0].text)  # type: ignore[union-attr]


PAIRS = [("legacy", "legacy"), ("legacy", "2026-07-28"), ("auto", "2026-07-28"), ("auto", "legacy")]


@pytest.mark.parametrize(("client_era", "era"), PAIRS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_clients_roots_reach_the_upstream_as_directly(
    tmp_path: Path, transport: str, client_era: str, era: str
) -> None:
    direct = StdioServerParameters(command=sys.executable, args=[ASKING])
    theirs = anyio.run(where, direct, client_era, "ada", "t1")
    assert theirs == (False, "roots of t1: file:///home/ada/project")
    args = serve_args(tmp_path, era)
    if transport == "stdio":
        target: Any = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())
        ours = anyio.run(where, target, client_era, "ada", "t1")
        refused = anyio.run(where, target, client_era, None, "t2")
    else:
        with http_server(args) as url:
            ours = anyio.run(where, url, client_era, "ada", "t1")
            refused = anyio.run(where, url, client_era, None, "t2")
    assert ours == theirs
    # A client that declared no roots gives none: the call fails, with no one else's roots in it.
    assert refused[0] in (True, "error") and "/home/" not in str(refused), refused


def two_tenants() -> contextlib.AbstractContextManager[tuple[str, dict[str, str]]]:
    """Served mode with API keys (stateless HTTP): alice and bob share one 2026-07-28 upstream."""
    return alice_and_bob_served(lambda folder: serve_args(folder, "2026-07-28"))


def test_each_tenant_gives_only_its_own_roots() -> None:
    results: dict[str, Any] = {}

    async def go(url: str, keys: dict[str, str]) -> None:
        async def one(user: str) -> None:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {keys[user]}"})
            async with http:
                results[user] = await where(streamable_http_client(url, http_client=http), "auto", user, user)

        async with anyio.create_task_group() as tasks:
            for user in ("alice", "bob"):
                tasks.start_soon(one, user)

    with two_tenants() as (url, keys):
        anyio.run(go, url, keys)
    assert results == {user: (False, f"roots of {user}: file:///home/{user}/project") for user in ("alice", "bob")}
