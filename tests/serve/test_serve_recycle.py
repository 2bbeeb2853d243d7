"""A served process nobody uses any more, far over its size at start, replaces itself
(serve/recycle.py): same pid, same listening socket, a fresh heap. These tests run the real
`toolroute serve` with API keys from a registry outside /tmp and a user's own stdio server, and
attack the handover: a call running across the idle timeout must hold the recycle off, a
client arriving during the restart must be served, and after it every user's tools still answer
as that user's own. A handed-over socket is only taken when it was handed to this very process."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import tenant_stdio
from _serve_helpers import ServedProcess, outside_tmp, served_http, stop_process, tool_env, toolroute_exe
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve import recycle
from toolroute.serve.store import UserStore

pytestmark = pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="resident size is read from /proc")

WAIT = 60.0  # bound on every wait for the server; only a hang reaches it


@pytest.fixture
def deployed() -> Iterator[tuple[Path, dict[str, str]]]:
    base = outside_tmp()
    store_url = f"sqlite:///{base / 'users.db'}"
    keys = {}
    with UserStore(store_url) as store:
        for user in ("alice", "bob"):
            store.add_user(user)
            store.add_server(user, "notes", tenant_stdio(f"{user}-notes"))
            keys[user] = store.add_key(user)
    yield base, keys
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def server(deployed: tuple[Path, dict[str, str]]) -> Iterator[ServedProcess]:
    base, _ = deployed
    args = [
        "--functions", "read_file,write_file,bash", "--api-keys", "--store", f"sqlite:///{base / 'users.db'}",
        "--workspace-template", str(base / "ws" / "{user}"),
        # Released a second after their last call; any growth at all is over the threshold.
        "--idle-timeout", "1", "--recycle-above", "0.001",
    ]  # fmt: skip
    with served_http(args, tool_env(XDG_CONFIG_HOME=str(base / "config"))) as started:
        yield started


def descriptors(pid: int) -> list[str]:
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return found


def children(pid: int) -> list[str]:
    """`pid`'s child processes, with their states (Z: a zombie nobody reaps)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(f"{entry.name} {stat.split(' (', 1)[1].split(')')[0]} {fields[0]}")
    return found


def calls(
    url: str, key: str, *steps: tuple[str, dict[str, Any]], answered: list[float] | None = None
) -> list[tuple[bool, str]]:
    """Each step called in one session: (is error, text); `answered` gets when each answer came."""

    async def go() -> list[tuple[bool, str]]:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            out = []
            for name, arguments in steps:
                result = await client.call_tool(name, arguments)
                if answered is not None:
                    answered.append(time.monotonic())
                out.append((bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)))
            return out

    return anyio.run(go)


def own_work(url: str, user: str, key: str, n: int) -> None:
    secret = f"{user}-secret-{n}"
    answers = calls(
        url,
        key,
        ("write_file", {"path": "note.txt", "content": secret}),
        ("read_file", {"path": "note.txt"}),
        (f"user_{user}_tool_add", {"a": n, "b": 1000}),
    )
    assert [error for error, _ in answers] == [False, False, False], answers
    assert secret in answers[1][1] and str(n + 1000) in answers[2][1], answers


def test_nobody_left_and_over_the_threshold_the_process_replaces_itself_and_serves_on(
    server: ServedProcess, deployed: tuple[Path, dict[str, str]]
) -> None:
    _, keys = deployed
    at_start = descriptors(server.proc.pid)
    for n, user in enumerate(("alice", "bob")):
        own_work(server.url, user, keys[user], n)
    server.wait_for("recycling")
    # Asked at once, this request most likely reaches the socket while no process accepts: it
    # waits in the socket's queue for the fresh process.
    own_work(server.url, "bob", keys["bob"], 7)
    server.wait_for(" on http://", count=2)
    assert server.proc.poll() is None  # the same process (pid), not an exit
    assert server.urls()[-1] == server.url  # the same socket
    own_work(server.url, "alice", keys["alice"], 3)
    # Released again, and over again (the threshold is that low): a second recycle. Nothing
    # of the old process was carried over but the listening socket: the fresh one holds no
    # more descriptors than the first held when it started.
    server.wait_for(" on http://", count=3)
    now = descriptors(server.proc.pid)
    assert len(now) <= len(at_start), (now, at_start)
    # The old process's children (the users' upstream servers) were ended and reaped before
    # the exec: none is left to the fresh one, not even as a zombie.
    assert children(server.proc.pid) == [], children(server.proc.pid)
    assert "Traceback" not in server.drain()


def test_a_call_running_past_the_idle_timeout_holds_the_recycle_off(
    server: ServedProcess, deployed: tuple[Path, dict[str, str]]
) -> None:
    _, keys = deployed
    # Work first, in the same session, so the process is well over its size at start (the
    # user's upstream connection, the modules a first call loads); then a call that outlives
    # the user's release (a second after it began): it must end before any recycle.
    answered: list[float] = []
    answers = calls(
        server.url,
        keys["alice"],
        ("write_file", {"path": "note.txt", "content": "alice-secret"}),
        ("read_file", {"path": "note.txt"}),
        ("user_alice_tool_add", {"a": 1, "b": 2}),
        ("bash", {"command": "sleep 4; echo finished"}),
        answered=answered,
    )
    assert [error for error, _ in answers] == [False] * 4 and "finished" in answers[3][1], answers
    # A recycle may follow the last answer at once (nobody is left then), but none may come while
    # the call runs: one then would be logged about two seconds before the answer. A second's
    # margin keeps a recycle just after the answer, read late, from counting as one during it.
    server.drain()
    during = [line for at, line in server.timed() if "recycling" in line and at < answered[-1] - 1.0]
    assert during == [], (during, server.drain())
    server.wait_for("recycling")  # and then it does (the threshold is that low)
    server.wait_for(" on http://", count=2)
    own_work(server.url, "alice", keys["alice"], 1)


def test_a_running_background_process_holds_the_recycle_off(
    server: ServedProcess, deployed: tuple[Path, dict[str, str]]
) -> None:
    """alice leaves a background process running and goes: she is released, but the process
    runs on (and would die with a recycle's exec), so no recycle comes until it has ended."""
    _, keys = deployed
    own_work(server.url, "alice", keys["alice"], 1)
    ((failed, text),) = calls(server.url, keys["alice"], ("bash", {"action": "start", "command": "sleep 6"}))
    assert not failed, text
    started = time.monotonic()
    server.wait_for("recycling", timeout=WAIT)  # once the process has ended (and alice is gone)
    at = next(at for at, line in server.timed() if "recycling" in line)
    # The release comes within a second or two of the start; the recycle only after the process
    # ended, 6 s after it began (a second's margin for reading the line late).
    assert at - started > 5.0, (at - started, server.drain())


def test_a_stop_asked_for_during_a_recycle_is_not_lost(
    server: ServedProcess, deployed: tuple[Path, dict[str, str]]
) -> None:
    """SIGTERM as the recycle begins: the process ends (the old one instead of its exec, or the
    new one as it starts), and never serves on as if the signal had not come."""
    _, keys = deployed
    own_work(server.url, "alice", keys["alice"], 1)
    server.wait_for("recycling")
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"SIGTERM during a recycle was lost: {server.drain()[-3000:]}")


def test_a_socket_is_taken_over_only_when_handed_to_this_very_process(monkeypatch: pytest.MonkeyPatch) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    saved = os.dup(recycle.LISTEN_FD) if _open(recycle.LISTEN_FD) else None
    os.dup2(listener.fileno(), recycle.LISTEN_FD)
    try:
        monkeypatch.setenv("LISTEN_FDS", "1")
        monkeypatch.setenv("LISTEN_PID", str(os.getpid() + 1))  # another process's
        assert recycle.inherited_socket() is None
        assert os.environ["LISTEN_FDS"] == "1"  # not ours: left alone
        monkeypatch.setenv("LISTEN_PID", str(os.getpid()))
        monkeypatch.setenv("LISTEN_FDS", "2")
        with pytest.raises(ValueError, match="exactly one socket"):
            recycle.inherited_socket()
        assert "LISTEN_PID" not in os.environ  # consumed either way: no child takes it
        os.dup2(listener.fileno(), recycle.LISTEN_FD)
        monkeypatch.setenv("LISTEN_FDS", "1")
        monkeypatch.setenv("LISTEN_PID", str(os.getpid()))
        taken = recycle.inherited_socket()
        assert taken is not None and taken.getsockname() == listener.getsockname()
        assert not os.get_inheritable(recycle.LISTEN_FD)
        taken.detach()
    finally:
        if saved is not None:
            os.dup2(saved, recycle.LISTEN_FD, inheritable=False)
            os.close(saved)
        else:
            os.close(recycle.LISTEN_FD)
        listener.close()


# As systemd hands a socket over: on descriptor 3, LISTEN_PID naming the process that runs.
ACTIVATE = """
import os, sys
os.dup2(int(os.environ.pop("HANDED")), 3)
os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1")
os.execv(sys.argv[1], sys.argv[1:])
"""


def _activated(host: str, *args: str) -> tuple[subprocess.Popen[str], socket.socket]:
    """`toolroute serve` given a listening socket bound to `host` (descriptor 3, LISTEN_PID its
    own), without authentication."""
    listener = socket.socket()
    listener.bind((host, 0))
    listener.listen()
    command = [toolroute_exe(), "serve", "--transport", "http", "--functions", "read_file", "--port", "1", *args]
    proc = subprocess.Popen(
        [sys.executable, "-c", ACTIVATE, *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=tool_env(HANDED=str(listener.fileno())),
        pass_fds=[listener.fileno()],
    )
    return proc, listener


def test_socket_activation_serves_on_the_socket_handed_over() -> None:
    proc, listener = _activated("127.0.0.1")
    port = listener.getsockname()[1]
    try:
        assert proc.stderr is not None
        line = ""
        deadline = time.monotonic() + WAIT
        while " on http://" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
        assert f" on http://127.0.0.1:{port}/mcp" in line, line  # not the --port given

        async def names() -> list[str]:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp")) as client:
                return [t.name for t in (await client.list_tools()).tools]

        assert anyio.run(names) == ["read_file"]
    finally:
        stop_process(proc)
        listener.close()


def test_a_socket_handed_over_on_every_interface_is_refused_without_authentication() -> None:
    """The loopback-only rule for a server without authentication holds for the address the
    socket handed over is bound to, whatever --host says."""
    proc, listener = _activated("0.0.0.0")
    try:
        _, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        stop_process(proc)
        pytest.fail("it served without authentication on every interface")
    finally:
        listener.close()
    assert proc.returncode != 0
    assert "refusing to serve on 0.0.0.0 without authentication" in err, err


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        recycle.Recycle(lambda: True, 0)


def test_a_stop_asked_for_before_or_after_the_request_always_wins() -> None:
    """The idle thread's request and a signal's withdraw may come in either order: the stop
    wins both ways, and the kept descriptor of the socket is closed, never leaked."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        stops: list[bool] = []

        before = recycle.Recycle(lambda: True, 1)
        before.serving(listener, lambda: stops.append(True))
        before.withdraw()
        assert before.request() is False and stops == []  # refused from now on
        before.exec_fresh()  # returns: nothing to hand over

        after = recycle.Recycle(lambda: True, 1)
        after.serving(listener, lambda: stops.append(True))
        assert after.request() is True and stops == [True]
        kept = after._kept_fd
        assert kept is not None and _open(kept)
        assert after.request() is False  # once
        after.withdraw()
        assert not after.requested and not _open(kept)
        after.exec_fresh()  # returns: withdrawn
        assert _open(listener.fileno())  # the server's own descriptor is untouched
