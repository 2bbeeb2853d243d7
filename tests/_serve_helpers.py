"""Shared helpers of the CLI / serve / adapter tests: the installed entry point and a test router."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.serve.allocator import served_environment
from toolroute.serve.store import UserStore

TESTS_DIR = Path(__file__).resolve().parent
TOOLS_MODULE = "_serve_tools"  # tests/_serve_tools.py, importable with tests/ on PYTHONPATH
STARTUP_TIMEOUT = 60.0  # generous: the machine is shared; only a hang reaches it


def toolroute_exe() -> str:
    """The installed console script (venv bin first, then PATH); a missing one is a failure."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    exe = shutil.which("toolroute", path=search)
    if exe is None:
        pytest.fail("the `toolroute` console script is not installed: run `pip install -e .` or `maturin develop`")
    return exe


def tool_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess that must import the test tool module."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH", "")]))
    # The allocator settings `serve --transport http` chooses, chosen already: no re-exec per server
    # start (0.4 s each; tests/serve/test_serve_allocator.py starts servers without them, to test that).
    env.update(served_environment(env))
    env.update(extra)
    return env


def run_cli(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [toolroute_exe(), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env or tool_env(),
        timeout=120,
    )


def make_router(workspace: Path) -> ToolRouter:
    """A router over the test tool module, built-ins confined to `workspace`."""
    return ToolRouter(packages=[TOOLS_MODULE], context=BuiltInToolContext(workspace))


def outside_tmp() -> Path:
    """A fresh folder outside /tmp (and $TMPDIR), as workspaces and registries are deployed: a
    sandbox replaces /tmp, which would hide a cross-tenant read. The caller removes it."""
    tmp = Path(tempfile.gettempdir()).resolve()
    for base in ("/var/tmp", "/srv", str(Path.home())):
        if Path(base).is_dir() and not Path(base).resolve().is_relative_to(tmp):
            folder = Path(tempfile.mkdtemp(prefix="toolroute-test-", dir=base))
            folder.chmod(0o755)  # tenants' uids pass through to their workspaces
            return folder
    pytest.skip("no folder outside /tmp to put workspaces in")


STOP_GRACE = 15.0  # seconds a stopped helper process has to exit on SIGTERM before SIGKILL


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after STOP_GRACE; the process is reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def processes_with(marker: str) -> list[int]:
    """Host pids of the processes whose command line contains `marker` (sandboxed ones included:
    a pid a command reports from inside bubblewrap's PID namespace means nothing out here)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@contextmanager
def http_server(args: Sequence[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Start `toolroute serve --transport http --port 0 ...`; yields the URL it reports."""
    with http_server_process(args, env) as (_, url):
        yield url


@contextmanager
def alice_and_bob_served(upstreams: Callable[[Path], list[str]]) -> Iterator[tuple[str, dict[str, str]]]:
    """`toolroute serve` over HTTP with API keys for alice and bob (its registry and workspaces in
    a folder outside temp); `upstreams(folder)` gives the arguments naming its upstream servers.
    Yields the URL and each user's key."""
    folder = outside_tmp()
    try:
        store_url = f"sqlite:///{folder / 'users.db'}"
        with UserStore(store_url) as store:
            keys = {}
            for user in ("alice", "bob"):
                store.add_user(user)
                keys[user] = store.add_key(user)
        args = [
            *("--api-keys", "--store", store_url, "--workspace-template", str(folder / "ws" / "{user}")),
            *upstreams(folder),
        ]
        with http_server(args) as url:
            yield url, keys
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def http_server_process(
    args: Sequence[str], env: dict[str, str] | None = None, prefix: Sequence[str] = ()
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`http_server`, also yielding the process (to kill it mid-test); `prefix` runs it through
    another command (one that execs it, keeping its pid)."""
    with served_http(args, env, prefix) as served:
        yield served.proc, served.url


class ServedProcess:
    """A running `toolroute serve --transport http`: its process, the URL it reported, and its
    stderr as it comes (a thread pumps it, so the server never blocks on a full pipe)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.url = proc, ""
        self.seen: list[str] = []
        self._arrived: list[float] = []  # when the pump read each line of `seen`
        self._lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._lines.put((time.monotonic(), line))
        self._lines.put(None)

    def drain(self) -> str:
        """The server's stderr so far (without waiting)."""
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                return "".join(self.seen)
            if item is not None:
                self._add(item)

    def wait_for(self, text: str, count: int = 1, timeout: float = STARTUP_TIMEOUT) -> None:
        """Until `text` has appeared `count` times on stderr; fails the test on exit or timeout."""
        deadline = time.monotonic() + timeout
        while "".join(self.seen).count(text) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {text!r} (x{count}) from the server: {''.join(self.seen)[-3000:]}")
            try:
                item = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if item is None:
                pytest.fail(f"the server exited ({self.proc.wait()}): {''.join(self.seen)[-3000:]}")
            self._add(item)

    def _add(self, item: tuple[float, str]) -> None:
        self._arrived.append(item[0])
        self.seen.append(item[1])

    def timed(self) -> list[tuple[float, str]]:
        """The lines seen so far, each with the `time.monotonic()` it was read at."""
        return list(zip(self._arrived, self.seen, strict=True))

    def urls(self) -> list[str]:
        """Every URL the server reported serving on, in order (one per start)."""
        return [line.rsplit(" on ", 1)[1].strip() for line in self.seen if " on http://" in line]


@contextmanager
def served_http(
    args: Sequence[str], env: dict[str, str] | None = None, prefix: Sequence[str] = ()
) -> Iterator[ServedProcess]:
    """`toolroute serve --transport http --port 0 ...` started and serving; stopped after."""
    proc = subprocess.Popen(
        [*prefix, toolroute_exe(), "serve", "--transport", "http", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env or tool_env(),
    )
    try:
        served = ServedProcess(proc)
        served.wait_for(" on http://")
        served.url = served.urls()[0]
        yield served
    finally:
        stop_process(proc)
