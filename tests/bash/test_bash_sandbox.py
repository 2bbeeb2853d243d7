"""The bash sandbox with real processes: bubblewrap where user namespaces work, Landlock (+ seccomp)
as the fallback. Each test states which confinement it exercises; where one cannot run here the
skip reason says so, and the fallback's tests cover the host."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _bash_helpers import all_processes, bash_router, call, is_alive, unavailable, wait_ended, wait_until

from toolroute.builtins._process import ProcessTable, pump, sandbox
from toolroute.builtins._process.sandbox import SandboxUnavailable, bwrap_path, landlock_abi
from toolroute.builtins.bash import RESOURCE_KEY
from toolroute.errors import ToolExecutionError

NO_BWRAP = unavailable(bwrap_path)
NO_LANDLOCK = unavailable(landlock_abi)
needs_bwrap = pytest.mark.skipif(
    NO_BWRAP is not None, reason=f"bubblewrap cannot run here, the Landlock fallback tests cover it: {NO_BWRAP}"
)
needs_landlock = pytest.mark.skipif(NO_LANDLOCK is not None, reason=f"no Landlock here: {NO_LANDLOCK}")
BOTH = [
    pytest.param("bubblewrap", marks=needs_bwrap),
    pytest.param("landlock", marks=needs_landlock),
]


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on 127.0.0.1 in this process; yields its port and what connections sent."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    received.append(conn.recv(100))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join(5)
    server.close()


CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo hello >&3 && echo connected"


# ---- writes and metadata ------------------------------------------------------------------


@pytest.mark.parametrize("mode", BOTH)
def test_writes_outside_are_refused_and_inside_work(ws: Path, outside: Path, mode: str) -> None:
    with bash_router(ws, sandbox=mode) as router:
        inside = call(router, command="echo kept > inside.txt && mkdir -p d/e && mv inside.txt d/e/ && echo ok")
        escaped = call(router, command=f"echo leaked > {outside}/leak.txt")
        removal = call(router, command=f"rm -rf {outside}")
        reading = call(router, command="head -c 5 /etc/passwd > /dev/null && echo readable")
    assert inside["stdout"] == "ok\n" and (ws / "d" / "e" / "inside.txt").read_text() == "kept\n"
    assert inside["sandbox"] == {"confinement": mode, "network": False, "view": "host"}
    assert escaped["exitCode"] != 0 and not (outside / "leak.txt").exists()
    assert (outside / "victim.txt").read_text() == "original\n", removal
    assert reading["stdout"] == "readable\n"


@needs_bwrap
def test_bubblewrap_refuses_chmod_chown_and_utime_outside(ws: Path, outside: Path) -> None:
    victim = outside / "victim.txt"
    os.chmod(victim, 0o640)
    before = victim.stat()
    (ws / "mine.txt").write_text("x")
    with bash_router(ws, sandbox="bubblewrap") as router:
        results = {
            what: call(router, command=f"{what} {victim}")
            for what in ("chmod 777", "chown 12345:12345", "touch -d 2001-01-01", "chgrp 12345")
        }
        inside = call(router, command="chmod 600 mine.txt && touch -d 2001-01-01 mine.txt && echo ok")
    for what, out in results.items():
        assert out["exitCode"] != 0, what
        assert "Read-only file system" in out["stderr"], (what, out["stderr"])
    after = victim.stat()
    assert (after.st_mode, after.st_uid, after.st_gid, after.st_mtime_ns) == (
        before.st_mode,
        before.st_uid,
        before.st_gid,
        before.st_mtime_ns,
    )
    assert inside["stdout"] == "ok\n" and (ws / "mine.txt").stat().st_mode & 0o777 == 0o600


@needs_bwrap
def test_bubblewrap_commands_have_no_capabilities_even_as_root(ws: Path, outside: Path) -> None:
    """As root, a sandbox that kept its capabilities could remount / read-write."""
    with bash_router(ws, sandbox="bubblewrap") as router:
        caps = call(router, command="grep CapEff /proc/self/status")
        remount = call(router, command=f"mount -o remount,rw,bind / / && touch {outside}/escaped")
    assert caps["stdout"].split()[1] == "0000000000000000"
    assert remount["exitCode"] != 0 and not (outside / "escaped").exists()


@needs_landlock
def test_landlock_fallback_does_not_refuse_metadata_changes(ws: Path, outside: Path) -> None:
    """The documented limit of the fallback: Landlock has no right for chmod/chown/utime."""
    victim = outside / "victim.txt"
    with bash_router(ws, sandbox="landlock") as router:
        out = call(router, command=f"chmod 604 {victim} && echo changed")
    assert out["stdout"] == "changed\n" and victim.stat().st_mode & 0o777 == 0o604


@needs_bwrap
def test_a_read_only_root_inside_the_workspace_stays_read_only(ws: Path) -> None:
    (ws / "vendor").mkdir()
    (ws / "vendor" / "lib.txt").write_text("pristine\n")
    with bash_router(ws, sandbox="bubblewrap", read_only_roots=[ws / "vendor"]) as router:
        out = call(router, command="echo changed > vendor/lib.txt")
        ok = call(router, command="echo fine > top.txt && echo ok")
    assert out["exitCode"] != 0 and (ws / "vendor" / "lib.txt").read_text() == "pristine\n"
    assert ok["stdout"] == "ok\n"


@pytest.mark.parametrize("mode", BOTH)
def test_declared_folders_are_writable(ws: Path, outside: Path, mode: str) -> None:
    with bash_router(ws, sandbox=mode, sandbox_writable=[outside]) as router:
        out = call(router, command=f"echo allowed > {outside}/declared.txt && echo ok")
    assert out["stdout"] == "ok\n" and (outside / "declared.txt").read_text() == "allowed\n"


@pytest.mark.parametrize("mode", BOTH)
def test_background_processes_are_confined_too(ws: Path, outside: Path, mode: str) -> None:
    with bash_router(ws, sandbox=mode) as router:
        started = call(router, action="start", command=f"touch {outside}/bg.txt; echo rc=$? > rc.txt")
        wait_ended(router, started["processId"])
    assert started["sandbox"]["confinement"] == mode
    assert (ws / "rc.txt").read_text() == "rc=1\n" and not (outside / "bg.txt").exists()


# ---- network ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", BOTH)
def test_network_is_refused_by_default(ws: Path, mode: str, listener: tuple[int, list[bytes]]) -> None:
    port, received = listener
    with bash_router(ws, sandbox=mode) as router:
        out = call(router, command=CONNECT.format(port=port), timeout=30)
    assert out["exitCode"] != 0 and "connected" not in out["stdout"]
    assert received == []


@pytest.mark.parametrize("mode", BOTH)
def test_the_host_network_is_shared_when_asked_by_name(ws: Path, mode: str, listener: tuple[int, list[bytes]]) -> None:
    """`sandbox_network="host"` (a local user's own agent) shares the host's namespace, its
    loopback included; `True` no longer does (tests/bash/test_bash_network.py)."""
    port, received = listener
    with bash_router(ws, sandbox=mode, sandbox_network="host") as router:
        out = call(router, command=CONNECT.format(port=port), timeout=30)
    assert out["stdout"] == "connected\n", out["stderr"]
    assert out["sandbox"]["network"] == "host"
    wait_until(lambda: received == [b"hello\n"], "the listener to receive the greeting")


@needs_landlock
def test_the_seccomp_filter_still_allows_unix_sockets(ws: Path) -> None:
    with bash_router(ws, sandbox="landlock") as router:
        out = call(router, command="python3 -c 'import socket; socket.socketpair(); print(\"unix ok\")'")
    assert out["stdout"] == "unix ok\n", out["stderr"]


UNIX_PROBE = """python3 -c '
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); print("host:", s.recv(5).decode())
except OSError as exc:
    print("host refused:", type(exc).__name__)
try:
    own = socket.socket(socket.AF_UNIX); own.bind("own.sock"); print("own: bound")
except OSError as exc:
    print("own refused:", type(exc).__name__)
socket.socketpair(); print("pair: ok")
' {path}"""


@pytest.fixture
def host_socket(outside: Path) -> Iterator[Path]:
    """A unix socket of the host (as a database's or the registry's), answering `hello`, in a
    folder outside the workspace and /tmp that every uid may pass."""
    outside.chmod(0o755)
    path = outside / "host.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o777)
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"hello")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(5)
    server.close()


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
@pytest.mark.parametrize("mode", BOTH)
def test_the_minimal_view_reaches_no_unix_socket_of_the_host(
    ws: Path, mode: str, network: bool, host_socket: Path
) -> None:
    """Landlock does not govern connect() on a named socket, and bubblewrap sharing the host's
    network shares its abstract sockets: there the minimal view refuses unix sockets outright
    (seccomp); bubblewrap without network hides the host's and keeps the command's own."""
    with bash_router(ws, sandbox=mode, sandbox_view="minimal", sandbox_network="host" if network else "none") as router:
        out = call(router, command=UNIX_PROBE.format(path=host_socket), timeout=30)
    assert "host:" not in out["stdout"], out
    assert "pair: ok" in out["stdout"], out  # an unnamed pair reaches nothing outside
    own_kept = mode == "bubblewrap" and not network
    assert ("own: bound" in out["stdout"]) is own_kept, out
    if not own_kept:
        assert "host refused: PermissionError" in out["stdout"], out


@pytest.mark.parametrize("mode", BOTH)
def test_the_host_view_keeps_unix_sockets(ws: Path, mode: str, host_socket: Path) -> None:
    """A local agent's own machine (the host view): its sockets stay reachable, as before."""
    with bash_router(ws, sandbox=mode) as router:
        out = call(router, command=UNIX_PROBE.format(path=host_socket), timeout=30)
    assert "host: hello" in out["stdout"] and "own: bound" in out["stdout"], out


# ---- temp ---------------------------------------------------------------------------------


@needs_bwrap
def test_tmp_is_private_per_workspace(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    marker = f"toolroute-private-{os.getpid()}"
    with bash_router(a, sandbox="bubblewrap") as ra, bash_router(b, sandbox="bubblewrap") as rb:
        wrote = call(ra, command=f"echo secret > /tmp/{marker} && echo ok")
        again = call(ra, command=f"cat /tmp/{marker}")
        other = call(rb, command=f"cat /tmp/{marker}")
    assert wrote["stdout"] == "ok\n"
    assert again["stdout"] == "secret\n"  # the same workspace keeps its /tmp between commands
    assert other["exitCode"] != 0 and other["stdout"] == ""
    assert not Path("/tmp", marker).exists()


@needs_landlock
def test_landlock_gives_a_private_tmpdir_and_refuses_shared_tmp(ws: Path) -> None:
    marker = f"toolroute-shared-{os.getpid()}"
    with bash_router(ws, sandbox="landlock") as router:
        private = call(router, command='f=$(mktemp) && echo t > "$f" && rm "$f" && echo "$TMPDIR"')
        shared = call(router, command=f"echo x > /tmp/{marker}")
    assert private["exitCode"] == 0 and private["stdout"].strip() != "/tmp"
    assert shared["exitCode"] != 0 and not Path("/tmp", marker).exists()


def test_private_tmp_folders_are_removed_with_the_router(ws: Path) -> None:
    with bash_router(ws) as router:
        table = router.resource(RESOURCE_KEY, ProcessTable)
        folder = table.private_tmp.folder(ws.resolve())
        assert folder.is_dir() and not folder.is_relative_to(ws.resolve())
    assert not folder.exists()


# ---- modes and failures -------------------------------------------------------------------


def test_bubblewrap_missing_falls_back_to_landlock_for_on(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if NO_LANDLOCK is not None:
        pytest.skip(f"no Landlock here: {NO_LANDLOCK}")

    def unavailable() -> str:
        raise SandboxUnavailable("bubblewrap is not installed (simulated)")

    monkeypatch.setattr(sandbox, "bwrap_path", unavailable)
    with bash_router(ws, sandbox="on") as router:
        assert call(router, command="true")["sandbox"]["confinement"] == "landlock"
    with bash_router(ws, sandbox="bubblewrap") as router, pytest.raises(ToolExecutionError, match="simulated"):
        call(router, command="true")


def test_nothing_available_is_an_error_for_on_and_unconfined_for_auto(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable() -> int:
        raise SandboxUnavailable("unavailable (simulated)")

    monkeypatch.setattr(sandbox, "bwrap_path", unavailable)
    monkeypatch.setattr(sandbox, "landlock_abi", unavailable)
    with bash_router(ws, sandbox="on") as router:
        for action in ("exec", "start"):
            with pytest.raises(ToolExecutionError, match=r"sandbox='on' is set but cannot be honoured.*simulated"):
                call(router, action=action, command="touch ran")
        assert call(router, action="list") == {"processes": []}
    assert not (ws / "ran").exists()
    with bash_router(ws, sandbox="auto") as router:
        assert call(router, command="true")["sandbox"] == {"confinement": "none"}


def test_sandbox_writes_true_still_means_confined(ws: Path) -> None:
    if NO_BWRAP is not None and NO_LANDLOCK is not None:
        pytest.skip("neither bubblewrap nor Landlock here")
    with bash_router(ws, sandbox_writes=True) as router:
        assert call(router, command="true")["sandbox"]["confinement"] in ("bubblewrap", "landlock")


@needs_landlock
def test_a_landlock_helper_failure_is_reported(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump, "_bash", "/nonexistent/bash")
    with bash_router(ws, sandbox="landlock") as router:
        with pytest.raises(ToolExecutionError, match="Landlock sandbox could not start the command"):
            call(router, command="true")
        assert call(router, action="list") == {"processes": []}


@needs_bwrap
def test_under_bubblewrap_nothing_outlives_its_command_not_even_setsid(ws: Path) -> None:
    """The PID namespace ends with the command: a process that left the group is killed too."""
    from test_bash_hostsignals import commands_with

    token = f"7{uuid.uuid4().int % 10**8:08d}.5"
    with bash_router(ws, sandbox="bubblewrap") as router:
        out = call(router, command=f"setsid sleep {token} & sleep {token} & disown -a; echo started")
        assert out["stdout"] == "started\n"
        assert commands_with(token, program=b"sleep\0") == []


def _children(pid: int) -> list[int]:
    return [p.pid for p in all_processes() if p.ppid == pid]


def _blocked_reading(pid: int, fd: int) -> bool:
    """Whether `pid` sits in read(2) (syscall 0 on x86-64, 63 on arm64) on descriptor `fd`."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] in ("0", "63") and int(fields[1], 16) == fd


@needs_bwrap
def test_a_stop_while_bubblewrap_still_sets_up_ends_the_sandbox_too(
    ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap's init in the new PID namespace sets its parent-death signal only once the sandbox
    is set up. A stop (a cancelled call) landing before then kills bwrap with its SIGTERM, which
    the init, a namespace's init, does not get: orphaned, it went on to run the command (a
    served user's cancelled call left its command running). The setup is held at bwrap's
    `--block-fd` while the stop lands, so the race is hit every time."""
    hold_r, hold_w = os.pipe()
    real_argv = pump.bubblewrap_argv

    def held(*args: Any, **kwargs: Any) -> list[str]:
        argv = real_argv(*args, **kwargs)
        return [argv[0], "--block-fd", str(hold_r), *argv[1:]]

    monkeypatch.setattr(pump, "bubblewrap_argv", held)
    token = f"7{uuid.uuid4().int % 10**8:08d}.5"
    plan = sandbox.SandboxPlan(kind="bubblewrap", workspace=ws, private_tmp=outside)
    spec = pump.CommandSpec(f"sleep {token}", ws, {"PATH": os.environ["PATH"]}, plan, pass_fds=(hold_r,))
    assert spec.contained
    proc = pump.spawn(spec, stdin_pipe=False)
    os.close(hold_r)
    inits: list[int] = []
    try:
        wait_until(lambda: bool(inits.extend(_children(proc.pid)) or inits), "bwrap to clone its init")
        wait_until(lambda: _blocked_reading(inits[0], hold_r), "bwrap's init to wait at --block-fd")
        runner = pump.Pump(proc, lambda _: None, lambda _: None, contained=spec.contained)
        runner.request_stop()
        outcome = runner.run()
        assert outcome.stopped
        assert not is_alive(inits[0]), "the sandbox's init outlived its stopped command"
    finally:
        for pid in inits:  # never let a failure run the command: kill before releasing the hold
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.close(hold_w)
        if proc.returncode is None:
            proc.kill()
            proc.wait()
