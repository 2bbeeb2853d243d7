"""Startup with an upstream that is slow or down (issue 55): `toolroute serve` starts without it,
in every auth mode, serves the other upstreams' tools, and retries it in the background; its
tools appear once it answers (`--api-keys` used to exit when one upstream missed its handshake,
though docs/mcp.md says a server that fails is left out). Real stdio servers, a real serve."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _mcp_helpers import DEMO, SERVERS
from _serve_helpers import outside_tmp, served_http, tool_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.store import UserStore

BOUND = 90.0  # seconds the late server's tools may take to show once it answers


@pytest.fixture
def folder() -> Iterator[Path]:
    base = outside_tmp()
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def _names(url: str, key: str | None) -> list[str]:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    http = create_mcp_http_client(headers=headers, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


async def _call(url: str, key: str | None, name: str) -> str:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    http = create_mcp_http_client(headers=headers, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool(name, {})
        assert not result.is_error, result
        return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize("auth", ["none", "api-keys"])
def test_a_slow_upstream_is_left_out_at_start_and_served_once_it_answers(folder: Path, auth: str) -> None:
    gate = folder / "gate"
    config = {
        "mcpServers": {
            "up": {"command": sys.executable, "args": [DEMO, "--name", "up", "--extra", "up_tool"]},
            # Silent until the gate opens: its handshake times out at start, and at every retry
            # until then. The start waits out this timeout: 10 s is long enough for an interpreter
            # to start on a loaded machine, and a retry that still misses is followed by another
            # (within BOUND).
            "late": {
                "command": sys.executable,
                "args": [str(SERVERS / "gated_server.py"), str(gate), "--name", "late", "--extra", "late_tool"],
                "connectTimeout": 10,
            },
            "down": {"command": str(folder / "no-such-server")},
        }
    }
    (folder / "mcp.json").write_text(json.dumps(config))
    args = ["--mcp-config", str(folder / "mcp.json"), "--mcp-servers", "up,late,down"]
    key = None
    if auth == "api-keys":
        with UserStore(f"sqlite:///{folder / 'users.db'}") as store:
            store.add_user("alice")
            key = store.add_key("alice")
        args += ["--api-keys", "--store", f"sqlite:///{folder / 'users.db'}", "--recycle-above", "0"]
    with served_http(args, tool_env()) as served:
        names = anyio.run(_names, served.url, key)
        assert "up_tool" in names and "late_tool" not in names, names
        gate.touch()
        deadline = time.monotonic() + BOUND
        while "late_tool" not in names:
            assert time.monotonic() < deadline, f"the late server's tools never appeared: {served.drain()[-2000:]}"
            time.sleep(0.5)
            names = anyio.run(_names, served.url, key)
        assert anyio.run(_call, served.url, key, "late_tool") == "late:late_tool"
        assert anyio.run(_call, served.url, key, "up_tool") == "up:up_tool"
        assert "left out" in served.drain()
