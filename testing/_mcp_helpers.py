"""Shared helpers for the MCP tests: real servers over stdio and HTTP (127.0.0.1 only)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SERVERS = Path(__file__).resolve().parents[1] / "tests" / "mcp_servers"  # the test servers (data, not code we import)
DEMO = str(SERVERS / "demo_server.py")


def demo_stdio(name: str = "demo", *extra_tools: str, **options: Any) -> dict[str, Any]:
    """An `mcpServers` entry that runs the demo server over stdio."""
    args = [DEMO, "--name", name]
    for tool in extra_tools:
        args += ["--extra", tool]
    return {"command": sys.executable, "args": args, **options}


SYSTEM_PYTHON = "/usr/bin/python3"


def tenant_stdio(name: str = "plain", **options: Any) -> dict[str, Any]:
    """An `mcpServers` entry a tenant's sandbox can run: the system's python3 (under /usr, in the
    minimal view) with the standard-library server's source given on its command line, since
    neither this virtual environment nor the test folder need be visible or passable there."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        import pytest

        pytest.skip(f"no {SYSTEM_PYTHON} to run a tenant's stdio server with (Debian package python3)")
    source = (SERVERS / "plain_server.py").read_text()
    return {"command": SYSTEM_PYTHON, "args": ["-c", source, "--name", name], **options}


def script_stdio(script: str, **options: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVERS / script)], **options}


def time_server() -> dict[str, Any]:
    """The third-party `mcp-server-time` from PyPI."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, interval: float = 0.05) -> bool:
    """Poll `predicate` until it holds or `timeout` passes (a bound, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


class HttpServer:
    """The demo server in its own process over streamable HTTP (or SSE) on 127.0.0.1."""

    def __init__(
        self,
        name: str = "web",
        *,
        sse: bool = False,
        port: int | None = None,
        extra: tuple[str, ...] = (),
        script: str | None = None,
        flags: tuple[str, ...] = (),
    ) -> None:
        self.name, self.sse, self.extra, self.flags = name, sse, extra, flags
        self.port = port or free_port()
        self.script = script  # another server in tests/mcp_servers, run with `--http PORT`
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse" if self.sse else f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        flag = "--sse" if self.sse else "--http"
        argv = [str(SERVERS / self.script)] if self.script else [DEMO, "--name", self.name]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *argv,
                flag,
                str(self.port),
                *(a for t in self.extra for a in ("--extra", t)),
                *self.flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_until(lambda: _port_open(self.port) or self.proc.poll() is not None, timeout=30):
            self.stop()
            raise RuntimeError("HTTP MCP server did not start")
        if self.proc.poll() is not None:
            raise RuntimeError(f"HTTP MCP server exited with {self.proc.returncode}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@contextmanager
def http_server(
    name: str = "web",
    *,
    sse: bool = False,
    extra: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
    script: str | None = None,
) -> Iterator[HttpServer]:
    server = HttpServer(name, sse=sse, extra=extra, flags=flags, script=script).start()
    try:
        yield server
    finally:
        server.stop()


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]) if fields[0] != "Z" else None  # a zombie is not a live child


def descendants(root: int | None = None) -> set[int]:
    """Live descendants of `root` (default: this test process), found by scanning /proc."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = _ppid(int(entry))
            if ppid is not None:
                parents[int(entry)] = ppid
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def mcp_children() -> set[int]:
    """Our live descendant processes that are MCP servers started by the gateway."""
    return {p for p in descendants() if "mcp_servers" in cmdline(p) or "mcp_server_time" in cmdline(p)}
