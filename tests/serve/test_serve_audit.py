"""The audit log misses nothing: every `tools/call` that reaches a real `toolroute serve` gets
exactly one line, on every path (done, tool error, not allowlisted, over a limit, a spoofed
affinity header, abandoned by the client mid-command), checked by count."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
from _serve_helpers import TOOLS_MODULE, http_server, processes_with
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.store import UserStore

WAIT = 30.0  # bound for a line to appear after its call ended (the machine is shared)


async def _call(url: str, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> Any:
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return await client.call_tool(name, arguments)


async def _abandon(url: str, headers: dict[str, str], marker: str) -> None:
    """Start a long bash call, then go away 2 s into it (the connection closes)."""
    http = create_mcp_http_client(headers=headers)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http)) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(client.call_tool, "bash", {"command": f"sleep 300; echo {marker}", "timeout": 300})
        with anyio.fail_after(60):
            while not processes_with(marker):
                await anyio.sleep(0.05)
        await anyio.sleep(2)
        tg.cancel_scope.cancel()


def _records(audit: Path) -> list[dict[str, Any]]:
    if not audit.exists():
        return []
    return [json.loads(line) for line in audit.read_text().splitlines()]


def _wait_for(audit: Path, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT
    while len(records := _records(audit)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return records


def test_every_call_gets_exactly_one_audit_line_on_every_path(deployed: Path) -> None:
    store_url = f"sqlite:///{deployed / 'users.db'}"
    with UserStore(store_url) as store:
        store.add_user("alice")
        key = store.add_key("alice")
    audit = deployed / "audit.jsonl"
    args = [
        *("--modules", TOOLS_MODULE, "--functions", "echo,bash,read_file", "--api-keys", "--store", store_url),
        *("--workspace-template", str(deployed / "ws" / "{user}"), "--audit-log", str(audit)),
        *("--max-argument-bytes", "2048", "--sandbox", "on"),
    ]
    bearer = {"Authorization": f"Bearer {key}"}
    spoofed = {**bearer, "X-Toolroute-User": "mallory"}
    marker = f"toolroute-audit-{time.monotonic_ns()}"
    with http_server(args) as url:
        calls: list[tuple[str, str]] = []  # (tool, expected outcome), in order

        def call(headers: dict[str, str], name: str, arguments: dict[str, Any], outcome: str) -> None:
            anyio.run(_call, url, headers, name, arguments)
            calls.append((name, outcome))
            assert len(_wait_for(audit, len(calls))) == len(calls), (name, outcome)

        call(bearer, "echo", {"text": "hi"}, "ok")
        call(bearer, "read_file", {"path": "missing.txt"}, "error")
        call(bearer, "write_file", {"path": "x", "content": "y"}, "refused")  # not allowlisted
        call(bearer, "echo", {"text": "x" * 5000}, "refused")  # over --max-argument-bytes
        call(spoofed, "echo", {"text": "hi"}, "refused")  # the header names another user
        anyio.run(_abandon, url, bearer, marker)
        calls.append(("bash", "cancelled"))
        _wait_for(audit, len(calls))
        assert audit.stat().st_mode & 0o777 == 0o600  # who called what is the operator's alone
    records = _records(audit)  # read once the server has exited: nothing else can arrive late
    assert [(r["tool"], r["outcome"]) for r in records] == calls
    assert {r["user"] for r in records} == {"alice"}
    assert records[-1]["argument_names"] == ["command", "timeout"] and records[-1]["duration_ms"] >= 2000
