"""`toolroute serve --transport http` runs its Python objects on malloc without glibc's caches of
freed blocks (issue 62): started without `PYTHONMALLOC` or those `GLIBC_TUNABLES`, the process
replaces itself (same pid, same command line) with one that has them, before it serves; an
operator's explicit choice is kept, a stdio server (one client) starts once as it is, and a
caller running the CLI in its own process is never replaced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from _serve_helpers import served_http, tool_env, toolroute_exe

from toolroute.cli import main
from toolroute.serve import allocator

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the served allocator is Linux's")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _environment_of(pid: int) -> dict[str, str]:
    """The environment process `pid` runs with now (/proc: the exec'd image's)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(item.decode().split("=", 1) for item in f.read().split(b"\0") if b"=" in item)


def _without_choice() -> dict[str, str]:
    return {k: v for k, v in tool_env().items() if k not in ("PYTHONMALLOC", "GLIBC_TUNABLES")}


def _tunables(env: dict[str, str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in env.get("GLIBC_TUNABLES", "").split(":") if item)


def _http_environment(env: dict[str, str]) -> dict[str, str]:
    """Serve over HTTP; once it answers an MCP initialize on the URL it reported, the
    environment of the very process started."""
    with served_http(["--functions", "read_file"], env) as served:
        request = urllib.request.Request(
            served.url,
            data=json.dumps(INITIALIZE).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.status == 200 and b"serverInfo" in answer.read()
        return _environment_of(served.proc.pid)


def test_served_over_http_without_a_choice_runs_on_malloc_without_thread_caches_in_the_same_process() -> None:
    env = _http_environment(_without_choice())
    assert env.get("PYTHONMALLOC") == "malloc"
    assert _tunables(env) == {"glibc.malloc.tcache_count": "0"}


def test_an_explicit_allocator_is_kept() -> None:
    assert _http_environment({**_without_choice(), "PYTHONMALLOC": "pymalloc"}).get("PYTHONMALLOC") == "pymalloc"


def test_an_explicit_tcache_is_kept() -> None:
    env = _http_environment({**_without_choice(), "GLIBC_TUNABLES": "glibc.malloc.tcache_count=3"})
    assert _tunables(env) == {"glibc.malloc.tcache_count": "3"}
    assert env.get("PYTHONMALLOC") == "malloc"


def test_the_served_environment_names_only_what_is_missing() -> None:
    # (Only the pure function here: glibc rewrites GLIBC_TUNABLES in place as it parses it, so
    # /proc/PID/environ shows a started process's first tunable alone.)
    served = "glibc.malloc.tcache_count=0"
    assert allocator.served_environment({}) == {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": served}
    assert allocator.served_environment({"PYTHONMALLOC": "pymalloc", "GLIBC_TUNABLES": served}) == {}
    assert allocator.served_environment({"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.mxfast=64"}) == {
        "GLIBC_TUNABLES": "glibc.malloc.mxfast=64:glibc.malloc.tcache_count=0"
    }
    operators = {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"}
    assert allocator.served_environment(operators) == {}


def test_a_stdio_server_starts_once_as_it_is() -> None:
    server = subprocess.Popen(
        [toolroute_exe(), "serve", "--functions", "read_file"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_without_choice(),
        text=True,
    )
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE) + "\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1  # serving: past any re-exec
        env = _environment_of(server.pid)
        assert "PYTHONMALLOC" not in env and "GLIBC_TUNABLES" not in env
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(30)


def test_the_cli_run_inside_a_callers_process_never_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    replaced: list[object] = []
    monkeypatch.setattr(os, "execv", lambda *a: replaced.append(a))
    # refused at once (no such tool), never replaced
    assert main(["serve", "--transport", "http", "--functions", "nope"]) != 0
    assert replaced == [] and "PYTHONMALLOC" not in os.environ and "GLIBC_TUNABLES" not in os.environ
    assert allocator.wanted({}) and allocator.wanted({"PYTHONMALLOC": "malloc"})
