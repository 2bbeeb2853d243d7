"""A call whose client goes away (or cancels it) is cancelled, and so is the command it runs.

The server is `toolroute serve` over HTTP on 127.0.0.1; the command is a real `bash` process
group, found by a marker in its command line (under bubblewrap a pid the command reports is one
of its own PID namespace, meaningless out here).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _serve_helpers import http_server, processes_with
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.cancellation import CancelToken, current_cancel_token, run_sync_cancellable
from toolroute.serve.store import UserStore

GONE_WITHIN = 10.0  # seconds from the cancel to the last process of the command's group
START_WITHIN = 60.0  # generous: the machine is shared


def _marker(tmp_path: Path) -> str:
    return f"toolroute-cancel-{time.monotonic_ns()}-{tmp_path.name}"


def _long_call(marker: str) -> dict[str, Any]:
    # A child process too, so the whole group must go, not just the shell.
    return {"command": f"sleep 600 & sleep 600; echo {marker}", "timeout": 600}


async def _until(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, what
        await anyio.sleep(0.05)


def _gone_within(marker: str, within: float) -> float:
    started = time.monotonic()
    deadline = started + within
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == [], f"the command outlived its cancelled call by {within:g} s"
    return time.monotonic() - started


async def _disconnect_mid_call(client: Client, marker: str) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.call_tool, "bash", _long_call(marker))
        await _until(lambda: bool(processes_with(marker)), START_WITHIN, "the command never started")
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 stateless, and the session era
def test_a_client_that_goes_away_mid_call_ends_its_command(tmp_path: Path, mode: str) -> None:
    marker = _marker(tmp_path)
    with http_server(["--functions", "bash", "--workspace", str(tmp_path)]) as url:

        async def go() -> None:
            async with Client(url, mode=mode) as client:  # type: ignore[arg-type]
                await _disconnect_mid_call(client, marker)

        anyio.run(go)
        _gone_within(marker, GONE_WITHIN)

        async def after() -> Any:
            async with Client(url, mode=mode) as client:  # type: ignore[arg-type]
                return await client.call_tool("bash", {"command": "echo still serving"})

        result = anyio.run(after)
        assert not result.is_error and json.loads(result.content[0].text)["stdout"] == "still serving\n"


def test_a_served_users_cancelled_call_ends_its_command_and_frees_its_slot(tmp_path: Path, deployed: Path) -> None:
    """Authenticated, stateless served mode with one call per user: the cancelled call's command
    ends, and its concurrency slot comes back (a cancel spammer cannot pin the user's slots)."""
    store_url = f"sqlite:///{deployed / 'users.db'}"
    with UserStore(store_url) as store:
        store.add_user("alice")
        key = store.add_key("alice")
    args = [
        *("--functions", "bash", "--api-keys", "--store", store_url),
        *("--workspace-template", str(deployed / "ws" / "{user}"), "--max-concurrent-calls", "1"),
    ]
    marker = _marker(tmp_path)
    with http_server(args) as url:

        async def session(work: Callable[[Client], Any]) -> Any:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                return await work(client)

        anyio.run(session, lambda client: _disconnect_mid_call(client, marker))
        _gone_within(marker, GONE_WITHIN)

        async def echo(client: Client) -> Any:
            deadline = time.monotonic() + GONE_WITHIN
            while True:
                result = await client.call_tool("bash", {"command": "echo slot free"})
                if not result.is_error or time.monotonic() > deadline:
                    return result
                assert "calls running" in result.content[0].text, result
                await anyio.sleep(0.1)

        result = anyio.run(session, echo)
        assert not result.is_error, result.content[0].text


def test_notifications_cancelled_ends_the_command_while_the_stream_stays_open(tmp_path: Path) -> None:
    """The MCP `notifications/cancelled` path, sent by hand on the session-era wire: the request's
    own HTTP stream stays open, so only the notification can have ended the command."""
    marker = _marker(tmp_path)
    version = "2025-11-25"
    with http_server(["--functions", "bash", "--workspace", str(tmp_path)]) as url:

        async def go() -> float:
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            async with httpx2.AsyncClient(timeout=30) as http:
                init = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": version,
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                }
                response = await http.post(url, json=init, headers=headers)
                assert response.status_code == 200, response.text
                headers = {
                    **headers,
                    "mcp-session-id": response.headers["mcp-session-id"],
                    "mcp-protocol-version": version,
                }
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                assert (await http.post(url, json=note, headers=headers)).status_code == 202
                call = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "bash", "arguments": _long_call(marker)},
                }
                async with http.stream("POST", url, json=call, headers=headers) as stream:
                    assert stream.status_code == 200
                    await _until(lambda: bool(processes_with(marker)), START_WITHIN, "the command never started")
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
                    assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
                    return await anyio.to_thread.run_sync(_gone_within, marker, GONE_WITHIN)

        anyio.run(go)


def test_cancelling_the_awaiting_task_fires_the_threads_token_and_waits_for_it() -> None:
    seen: list[CancelToken | None] = []
    returned = threading.Event()

    def blocking() -> None:
        token = current_cancel_token()
        seen.append(token)
        stopped = threading.Event()
        assert token is not None
        with token.on_cancel(stopped.set):
            assert stopped.wait(30), "the token never fired"
        time.sleep(0.2)  # cleanup after the stop: the cancelled task must wait for it
        returned.set()

    async def go() -> None:
        with anyio.move_on_after(0.3):
            await run_sync_cancellable(blocking)
        assert returned.is_set()

    anyio.run(go)
    assert seen and seen[0] is not None and seen[0].cancelled
    assert current_cancel_token() is None
