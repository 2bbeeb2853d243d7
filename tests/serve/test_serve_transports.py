"""`toolroute serve` as a real process, driven by the MCP SDK's own client over stdio and HTTP."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from _serve_helpers import TOOLS_MODULE, http_server, run_cli, tool_env, toolroute_exe
from _serve_tools import MARKER_ENV
from mcp import Client, StdioServerParameters

SERVE_ARGS = ["--modules", TOOLS_MODULE, "--functions", "echo,add", "--mcp-servers", "notes"]
MODES = ["auto", "legacy"]  # 2026-07-28 stateless and the 2025-11-25 handshake


def stdio_params(args: list[str], env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=env)


async def exercise(target: object, mode: str) -> dict:
    """List, call served tools, and try names that were not served."""
    async with Client(target, mode=mode) as client:  # type: ignore[arg-type]
        listed = [t.name for t in (await client.list_tools()).tools]
        echo = await client.call_tool("echo", {"text": "hi", "times": 2})
        add = await client.call_tool("add", {"a": 20, "b": 22})
        shout = await client.call_tool("notes_shout", {"text": "mcp"})
        bad = await client.call_tool("add", {"a": "x", "b": 1})
        refused = {
            name: await client.call_tool(name, {"command": "touch x"})
            for name in ("touch_marker", "fail", "bash", "user_1_tool_echo")
        }
        return {
            "protocol": client.protocol_version,
            "listed": listed,
            "echo": echo,
            "add": add,
            "shout": shout,
            "bad": bad,
            "refused": refused,
        }


def check(outcome: dict, mode: str, marker: Path) -> None:
    assert outcome["protocol"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert outcome["listed"] == ["echo", "add", "notes_shout"]
    assert (outcome["echo"].is_error, outcome["echo"].content[0].text) == (False, "hihi")
    assert json.loads(outcome["add"].content[0].text) == {"sum": 42}
    assert outcome["shout"].content[0].text == "MCP"
    assert outcome["bad"].is_error and "valid integer" in outcome["bad"].content[0].text
    for name, result in outcome["refused"].items():
        assert result.is_error, name
        assert result.content[0].text == f"tool {name!r} is not served by this server"
    assert not marker.exists()  # touch_marker exists in the router but was never run


@pytest.mark.parametrize("mode", MODES)
def test_stdio_serves_the_allowlist_and_refuses_the_rest(tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "ran"
    params = stdio_params(SERVE_ARGS, tool_env(**{MARKER_ENV: str(marker)}))
    check(anyio.run(exercise, params, mode), mode, marker)


@pytest.mark.parametrize("mode", MODES)
def test_http_serves_the_allowlist_and_refuses_the_rest(tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "ran"
    with http_server(SERVE_ARGS, tool_env(**{MARKER_ENV: str(marker)})) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")  # loopback by default
        check(anyio.run(exercise, url, mode), mode, marker)


def test_http_rejects_a_foreign_host_header() -> None:
    """DNS-rebinding guard: a page on another origin cannot drive the loopback server."""
    with http_server(SERVE_ARGS) as url:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Host": "evil.example", "Accept": "application/json, text/event-stream"}
        response = httpx2.post(url, json=body, headers=headers, timeout=30)
        assert response.status_code in (403, 421), response.text


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_builtins_are_confined_and_unserved_builtins_refused(tmp_path: Path, transport: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("inside the workspace\n")
    (tmp_path / "secret.txt").write_text("TOP-SECRET-CONTENT\n")
    marker = tmp_path / "bash-ran"
    args = ["--functions", "read_file", "--workspace", str(workspace)]

    async def go(target: object) -> tuple:
        async with Client(target) as client:  # type: ignore[arg-type]
            listed = [t.name for t in (await client.list_tools()).tools]
            inside = await client.call_tool("read_file", {"path": "a.txt"})
            outside = await client.call_tool("read_file", {"path": "../secret.txt"})
            bash = await client.call_tool("bash", {"command": f"touch {marker}"})
            return listed, inside, outside, bash

    if transport == "stdio":
        listed, inside, outside, bash = anyio.run(go, stdio_params(args, tool_env()))
    else:
        with http_server(args) as url:
            listed, inside, outside, bash = anyio.run(go, url)
    assert listed == ["read_file"]
    assert not inside.is_error and "inside the workspace" in inside.content[0].text
    assert outside.is_error and "TOP-SECRET-CONTENT" not in outside.content[0].text
    assert bash.is_error and bash.content[0].text == "tool 'bash' is not served by this server"
    assert not marker.exists()


def test_stdio_survives_tools_that_write_to_stdout() -> None:
    """Stray output from a tool (or its children) must not corrupt the JSON-RPC stream."""
    params = stdio_params(["--modules", TOOLS_MODULE, "--functions", "noisy,echo"], tool_env())

    async def go() -> tuple:
        async with Client(params) as client:
            noisy = await client.call_tool("noisy", {})
            echo = await client.call_tool("echo", {"text": "after"})
            return noisy, echo

    noisy, echo = anyio.run(go)
    assert (noisy.is_error, noisy.content[0].text) == (False, "still fine")
    assert echo.content[0].text == "after"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigterm_stops_the_server_cleanly(transport: str) -> None:
    proc = subprocess.Popen(
        [toolroute_exe(), "serve", "--transport", transport, "--port", "0", *SERVE_ARGS],
        stdin=subprocess.PIPE,  # held open: a stdio server would otherwise stop at EOF
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=tool_env(),
    )
    try:
        assert proc.stderr is not None
        assert " tool(s) on " in proc.stderr.readline()  # listening
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_http_port_in_use_is_a_one_line_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        proc = run_cli("serve", "--transport", "http", "--port", port, *SERVE_ARGS)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(f"toolroute: error: cannot listen on 127.0.0.1:{port}")
    assert len(proc.stderr.strip().splitlines()) == 1
