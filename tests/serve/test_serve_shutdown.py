"""Nothing a server started outlives it, on every way it can end (issue 55): SIGTERM, a second
SIGTERM, SIGINT, SIGKILL of the server (where death signals must end the rest), stdin closed for
stdio, a recycle. The server runs under a subreaper (tests/_subreaper.py), so whatever it leaves
behind becomes that process's child and is read from the process table: tenant commands (a burst
of `bash true` in flight, a long foreground command), a background process, a tenant's own
upstream server, another tenant's own server deaf to SIGTERM whose handshake (its first listing)
is in progress, and a shared upstream. A signalled server must also be gone within 15 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import DEMO, tenant_stdio
from _serve_helpers import TESTS_DIR, TOOLS_MODULE, ServedProcess, outside_tmp, served_http, tool_env, toolroute_exe
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.store import UserStore

SUBREAPER = str(TESTS_DIR / "_subreaper.py")
STOP_BOUND = 15.0  # a signalled server is gone within this (issue 55)
SETTLE = 20.0  # what a dead server left may take this long to be ended by death signals
# A tenant's own server that never answers its handshake and ignores SIGTERM.
DEAF = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return rest[0].decode(), int(rest[1])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == parent and stat[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@dataclass
class Reaped:
    """A server running under the subreaper."""

    served: ServedProcess
    info: Path

    def _read(self, word: str) -> int | None:
        for line in self.info.read_text().splitlines() if self.info.exists() else ():
            if line.startswith(word + " "):
                return int(line.split()[1])
        return None

    @property
    def pid(self) -> int:
        pid = self._read("pid")
        assert pid is not None
        return pid

    def wait_exit(self, bound: float) -> float:
        """Seconds until the server ended; fails past `bound`."""
        start = time.monotonic()
        while self._read("exit") is None:
            assert time.monotonic() - start < bound, f"the server still runs {bound:.0f} s later"
            time.sleep(0.05)
        return time.monotonic() - start

    def leftovers(self) -> list[str]:
        """What the server left, once death signals had their time (bounded)."""
        deadline = time.monotonic() + SETTLE
        while (left := _children(self.served.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [f"{pid}: {_command_line(pid)}" for pid in left]


@pytest.fixture(scope="module")
def registry() -> Iterator[tuple[Path, dict[str, str]]]:
    base = outside_tmp()
    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(base / "config")
    try:
        keys = {}
        with UserStore(f"sqlite:///{base / 'users.db'}") as store:
            for user in ("alice", "bob"):
                store.add_user(user)
                keys[user] = store.add_key(user)
            store.add_server("alice", "own", tenant_stdio("alice-own"))
            store.add_server("bob", "deaf", {"command": "/usr/bin/python3", "args": ["-c", DEAF]})
        (base / "mcp.json").write_text(
            json.dumps({"mcpServers": {"shared": {"command": sys.executable, "args": [DEMO, "--name", "shared"]}}})
        )
        yield base, keys
    finally:
        if saved is None:
            os.environ.pop("XDG_CONFIG_HOME", None)
        else:
            os.environ["XDG_CONFIG_HOME"] = saved
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def reaped_server(base: Path, *more: str) -> Iterator[Reaped]:
    info = base / f"reaper-{time.monotonic_ns()}"
    args = [
        *("--modules", TOOLS_MODULE, "--functions", "bash,echo", "--mcp-config", str(base / "mcp.json")),
        *("--mcp-servers", "shared", "--api-keys", "--store", f"sqlite:///{base / 'users.db'}"),
        *("--workspace-template", str(base / "ws" / "{user}"), "--recycle-above", "0"),
        *more,
    ]
    env = tool_env(XDG_CONFIG_HOME=str(base / "config"))
    with served_http(args, env, prefix=[sys.executable, SUBREAPER, str(info), "--"]) as served:
        reaped = Reaped(served, info)
        try:
            yield reaped
        finally:
            with contextlib.suppress(OSError):
                os.kill(reaped.pid, signal.SIGKILL)


async def _call(url: str, key: str, name: str, arguments: dict[str, Any]) -> str:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool(name, arguments)
        return "".join(getattr(c, "text", "") for c in result.content)


async def _list(url: str, key: str) -> list[str]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def _in_background(fn: Callable[[], object], stop: threading.Event) -> None:
    def run() -> None:
        while not stop.is_set():
            with contextlib.suppress(BaseException):  # the server goes away mid-call: expected
                fn()

    threading.Thread(target=run, daemon=True).start()


def _busiest_state(reaped: Reaped, keys: dict[str, str], stop: threading.Event) -> None:
    """Everything a server can have started, running at once."""
    url = reaped.served.url
    started = json.loads(anyio.run(_call, url, keys["alice"], "bash", {"action": "start", "command": "sleep 300"}))
    assert "processId" in started, started
    assert any(name.endswith("_tool_echo") for name in anyio.run(_list, url, keys["alice"]))  # her own server runs
    _in_background(lambda: anyio.run(_call, url, keys["alice"], "bash", {"command": "sleep 300"}), stop)
    for _ in range(6):  # a burst of short commands in flight
        _in_background(lambda: anyio.run(_call, url, keys["alice"], "bash", {"command": "true"}), stop)
    _in_background(lambda: anyio.run(_list, url, keys["bob"]), stop)  # his deaf server's handshake
    deadline = time.monotonic() + 60
    while not any("signal.SIG_IGN" in _command_line(pid) for pid in _descendants(reaped.pid)):
        assert time.monotonic() < deadline, "bob's own server never started"
        time.sleep(0.1)
    time.sleep(1.0)  # the burst is running


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents[int(entry)] = stat[1]
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        kids = [child for child, parent in parents.items() if parent == pid]
        found += kids
        frontier += kids
    return found


@pytest.mark.parametrize("how", ["sigterm", "sigterm-twice", "sigint", "sigkill"])
def test_nothing_the_server_started_outlives_it(registry: tuple[Path, dict[str, str]], how: str) -> None:
    base, keys = registry
    stop = threading.Event()
    try:
        with reaped_server(base) as reaped:
            _busiest_state(reaped, keys, stop)
            if how == "sigkill":
                os.kill(reaped.pid, signal.SIGKILL)
            else:
                os.kill(reaped.pid, signal.SIGINT if how == "sigint" else signal.SIGTERM)
                if how == "sigterm-twice":
                    time.sleep(0.5)
                    os.kill(reaped.pid, signal.SIGTERM)
            took = reaped.wait_exit(60)
            left = reaped.leftovers()
    finally:
        stop.set()
    assert left == [], f"{how}: left behind {left}"
    assert took < STOP_BOUND, f"{how}: the server took {took:.1f} s to end"


def test_nothing_outlives_a_stdio_server_whose_client_closes_stdin(registry: tuple[Path, dict[str, str]]) -> None:
    base, _ = registry
    info = base / f"reaper-{time.monotonic_ns()}"
    command = [
        *(sys.executable, SUBREAPER, str(info), "--", toolroute_exe(), "serve"),
        *("--modules", TOOLS_MODULE, "--functions", "bash,echo", "--mcp-config", str(base / "mcp.json")),
        *("--mcp-servers", "shared", "--workspace", str(base), "--sandbox", "auto"),
    ]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=tool_env()
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        background = {"name": "bash", "arguments": {"action": "start", "command": "sleep 300"}}
        foreground = {"name": "bash", "arguments": {"command": "sleep 300"}}
        messages = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": background},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": foreground},
        ]
        for message in messages[:3]:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
        answered = set()
        deadline = time.monotonic() + 60
        while answered != {1, 2}:
            assert time.monotonic() < deadline
            answered.add(json.loads(proc.stdout.readline()).get("id"))
        proc.stdin.write((json.dumps(messages[3]) + "\n").encode())
        proc.stdin.flush()
        # The foreground sleep runs: a second `sleep 300` beside the background one.
        while sum(_command_line(pid).startswith("sleep 300") for pid in _descendants(proc.pid)) < 2:
            assert time.monotonic() < deadline, "the foreground command never started"
            time.sleep(0.05)
        proc.stdin.close()  # the client goes
        reaped = Reaped(ServedProcess.__new__(ServedProcess), info)
        reaped.served.proc = proc  # type: ignore[misc]
        took = reaped.wait_exit(60)
        left = reaped.leftovers()
    finally:
        proc.terminate()
        proc.wait(30)
    assert left == [], f"stdin closed: left behind {left}"
    assert took < STOP_BOUND, f"the server took {took:.1f} s to end after its client left"


FORCED = """
import subprocess, sys, time
from toolroute.serve.shutdown import Shutdown
stop = Shutdown(force_after=float(sys.argv[1]))
# Deaf to SIGTERM, in a session of its own: only the force reaches it.
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(15, signal.SIG_IGN); time.sleep(300)"],
                 start_new_session=True)
stop.asked()
if sys.argv[2] == "twice":
    stop.asked()
time.sleep(300)  # a stop that hangs
"""


@pytest.mark.parametrize("how", ["clock", "twice"])
def test_a_hung_stop_is_forced_and_takes_what_it_started_along(tmp_path: Path, how: str) -> None:
    """The bound's last resort: at the clock's end (or a second signal) a stop that hangs exits
    (status 1), and what it started, even deaf to SIGTERM and in a session of its own, is gone."""
    info = tmp_path / "reaper"
    command = [sys.executable, SUBREAPER, str(info), "--", sys.executable, "-c", FORCED, "1", how]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=tool_env())
    try:
        reaped = Reaped(ServedProcess.__new__(ServedProcess), info)
        reaped.served.proc = proc  # type: ignore[misc]
        reaped.wait_exit(60)
        assert reaped._read("exit") == 1
        assert reaped.leftovers() == []
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "stopping by force" in err


def test_nothing_the_old_process_started_outlives_a_recycle(registry: tuple[Path, dict[str, str]]) -> None:
    """A recycle (the process replaces itself once nobody is served): what the old program
    started (a tenant's own server, the shared upstream, the commands' watchdog) is gone, and
    the process (same pid) serves on with only what the new program starts."""
    base, keys = registry
    with reaped_server(base, "--idle-timeout", "1", "--recycle-above", "0.001") as reaped:
        assert anyio.run(_call, reaped.served.url, keys["alice"], "bash", {"command": "echo hi"}).find("hi") >= 0
        assert any(name.endswith("_tool_echo") for name in anyio.run(_list, reaped.served.url, keys["alice"]))
        before = set(_descendants(reaped.pid))
        assert before, "the server started nothing"
        reaped.served.wait_for("recycling")
        reaped.served.wait_for(" on http://", count=2)
        assert _children(reaped.served.proc.pid) == [reaped.pid]  # nothing else left to the subreaper
        deadline = time.monotonic() + SETTLE
        while (left := [pid for pid in before if _alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == [], [f"{pid}: {_command_line(pid)}" for pid in left]
