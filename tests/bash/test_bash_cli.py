"""`toolroute call|serve|tools` options for bash's sandbox, network and environment, and the host's
SIGTERM ending in-flight commands of a real `toolroute` process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import anyio
import pytest
from _bash_helpers import unavailable, wait_until
from _serve_helpers import run_cli, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from test_bash_hostsignals import commands_with

from toolroute.builtins._process.sandbox import bwrap_path

NO_BWRAP = unavailable(bwrap_path)
needs_bwrap = pytest.mark.skipif(NO_BWRAP is not None, reason=f"bubblewrap cannot run here: {NO_BWRAP}")


def call_bash(ws: Path, command: str, *flags: str, env: dict[str, str] | None = None) -> dict:
    proc = run_cli("call", "bash", json.dumps({"command": command}), "--workspace", str(ws), *flags, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_call_passes_no_secret_unless_named(tmp_path: Path) -> None:
    env = tool_env(OPENAI_API_KEY="sk-cli-secret", AWS_SECRET_ACCESS_KEY="aws-cli-secret")
    command = 'echo "${OPENAI_API_KEY-none}|${AWS_SECRET_ACCESS_KEY-none}"'
    assert call_bash(tmp_path, command, env=env)["stdout"] == "none|none\n"
    named = call_bash(tmp_path, command, "--env", "OPENAI_API_KEY", env=env)
    assert named["stdout"] == "sk-cli-secret|none\n"
    assert call_bash(tmp_path, command, "--env-inherit", env=env)["stdout"] == "sk-cli-secret|aws-cli-secret\n"


@needs_bwrap
def test_call_sandbox_flags_confine_and_report(tmp_path: Path, outside: Path) -> None:
    out = call_bash(tmp_path, f"touch {outside}/escaped; echo rc=$?", "--sandbox", "bubblewrap")
    assert out["stdout"] == "rc=1\n" and not (outside / "escaped").exists()
    assert out["sandbox"] == {"confinement": "bubblewrap", "network": False, "view": "host"}
    extra = tmp_path / "extra"
    extra.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    flags = ("--sandbox", "bubblewrap", "--network", "host", "--writable", str(extra))
    out = call_bash(ws, f"echo ok > {extra}/f && cat {extra}/f", *flags)
    assert out["stdout"] == "ok\n" and out["sandbox"]["network"] == "host"


def test_call_refuses_to_run_unconfined_when_a_mode_cannot_be_honoured(tmp_path: Path) -> None:
    # PATH without bwrap makes bubblewrap unavailable whatever this machine has.
    proc = run_cli(
        "call",
        "bash",
        '{"command": "touch ran"}',
        "--workspace",
        str(tmp_path),
        "--sandbox",
        "bubblewrap",
        env=tool_env(PATH="/nonexistent"),
    )
    assert proc.returncode == 4 and "cannot be honoured" in proc.stderr
    assert not (tmp_path / "ran").exists()


def test_tools_reports_the_confinement(tmp_path: Path) -> None:
    table = run_cli("tools", "--functions", "bash", "--format", "table", "--workspace", str(tmp_path))
    assert table.returncode == 0
    assert table.stdout.strip().splitlines()[-1] == "bash: commands run unconfined (sandbox=off)"
    if NO_BWRAP is None:
        boxed = run_cli("tools", "--functions", "bash", "--sandbox", "auto", "--workspace", str(tmp_path))
        assert json.loads(boxed.stdout)[0]["function"]["name"] == "bash"  # JSON stays JSON; the note is on stderr
        assert "bash: commands run under bubblewrap (sandbox=auto, view=host, no network)" in boxed.stderr
        minimal = run_cli(
            "tools", "--functions", "bash", "--sandbox", "on", "--view", "minimal", "--workspace", str(tmp_path)
        )
        assert "bash: commands run under bubblewrap (sandbox=on, view=minimal, no network)" in minimal.stderr


def test_call_sigterm_ends_the_in_flight_command(tmp_path: Path) -> None:
    token = f"5{uuid.uuid4().int % 10**8:08d}.5"
    proc = subprocess.Popen(
        [toolroute_exe(), "call", "bash", json.dumps({"command": f"sleep {token}", "timeout": 600})],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=tool_env(),
        start_new_session=True,
    )
    try:
        wait_until(lambda: bool(commands_with(token, program=b"sleep\0")), "the command to run")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM
        wait_until(lambda: not commands_with(token, program=b"sleep\0"), "the command to end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def sleep_in_flight(target: str | StdioServerParameters, token: str) -> None:
    """Call bash `sleep <token>` through an MCP client on a daemon thread; return once it runs."""

    async def in_flight() -> None:
        async with Client(target) as client:
            await client.call_tool("bash", {"command": f"sleep {token}", "timeout": 600})

    def run() -> None:
        with contextlib.suppress(BaseException):  # the server goes away mid-call: expected
            anyio.run(in_flight)

    threading.Thread(target=run, daemon=True).start()
    wait_until(lambda: bool(commands_with(token, program=b"sleep\0")), "the command to run")


@pytest.mark.parametrize("sandbox", ["off", pytest.param("bubblewrap", marks=needs_bwrap)])
def test_serve_http_sigterm_ends_the_in_flight_command_and_stops(tmp_path: Path, sandbox: str) -> None:
    token = f"6{uuid.uuid4().int % 10**8:08d}.5"
    serve_args = ["--workspace", str(tmp_path), "--sandbox", sandbox]
    proc = subprocess.Popen(
        [toolroute_exe(), "serve", "--transport", "http", "--port", "0", "--functions", "bash", *serve_args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=tool_env(),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert " tool(s) on " in line, line
        sleep_in_flight(line.rsplit(" on ", 1)[1].strip(), token)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)  # well before the command's 600 s
        wait_until(lambda: not commands_with(token, program=b"sleep\0"), "the command to end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_stdio_sigterm_ends_the_in_flight_command(tmp_path: Path) -> None:
    """Only the command's end is asserted: the server stopping within a bound is issue 13's."""
    token = f"8{uuid.uuid4().int % 10**8:08d}.5"
    workspace = tmp_path / f"ws-{token}"  # names the server in /proc
    workspace.mkdir()
    params = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--functions", "bash", "--workspace", str(workspace), "--sandbox", "off"],
        env=tool_env(),
    )
    sleep_in_flight(params, token)
    servers = [pid for pid in commands_with(str(workspace)) if b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(servers) == 1
    try:
        os.kill(servers[0], signal.SIGTERM)
        wait_until(lambda: not commands_with(token, program=b"sleep\0"), "the command to end")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(servers[0], signal.SIGKILL)
