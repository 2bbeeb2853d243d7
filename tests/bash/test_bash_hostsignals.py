"""The host's SIGTERM, SIGHUP and SIGKILL end every background and in-flight command.

The host is a real child Python process running a router; after it is signalled, /proc is scanned
(bounded in time) for the commands' processes, found by a unique token in their command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bash_helpers import unavailable, wait_for_file, wait_until

from toolroute.builtins._process.sandbox import bwrap_path

NO_BWRAP = unavailable(bwrap_path)
MODES = [
    "off",
    pytest.param("bubblewrap", marks=pytest.mark.skipif(NO_BWRAP is not None, reason=f"no bubblewrap: {NO_BWRAP}")),
]

HOST_PIDS: set[int] = set()  # the hosts carry the token in their own command line
HOST = textwrap.dedent(
    """
    import signal, sys, threading, time
    from pathlib import Path
    from toolroute.context import BuiltInToolContext
    from toolroute.router import ToolRouter

    ws, mode, token, own_handler, escapee = sys.argv[1:6]
    # The default actions, whatever was inherited (under nohup SIGHUP arrives ignored): the test
    # is that toolroute's handlers end every command and then let the default action end the host.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if own_handler == "yes":  # a host with handlers of its own: they must still run, after ours
        def handler(signum, frame):
            Path(ws, "host-handler-ran").write_text(signal.Signals(signum).name)
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGHUP, handler)
    router = ToolRouter(context=BuiltInToolContext(ws, sandbox=mode))
    router.execute("bash", {"action": "start", "command": f"sleep {token}1 & sleep {token}2; wait"})
    exec_args = {"command": f"sleep {token}3", "timeout": 600}
    threading.Thread(target=router.execute, args=("bash", exec_args), daemon=True).start()
    if escapee == "yes":  # leaves its group: only the death watch (or bubblewrap's namespace) finds it
        router.execute("bash", {"action": "start", "command": f"setsid sleep {token}4 & wait"})
    Path(ws, "ready").write_text("1")
    while True:
        time.sleep(0.05)
    """
)


def commands_with(token: str, *, program: bytes = b"") -> list[int]:
    """Live (non-zombie) processes but hosts whose command line carries `token` (and starts with `program`)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in HOST_PIDS:
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if (
            token.encode() in cmdline
            and cmdline.startswith(program)
            and stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")
        ):
            found.append(int(entry))
    return found


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    """(workspace, started hosts); every host still running at the end is killed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    hosts: list[subprocess.Popen[bytes]] = []
    yield ws, hosts
    for proc in hosts:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def start_host(
    ws: Path, hosts: list[subprocess.Popen[bytes]], mode: str, own_handler: bool = False, escapee: bool = False
) -> str:
    token = f"4{uuid.uuid4().int % 10**8:08d}."  # sleep accepts "412345678.1": unique and harmless
    script = ws.parent / "host.py"
    script.write_text(HOST)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ws), mode, token, "yes" if own_handler else "no", "yes" if escapee else "no"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # not in pytest's group: signals aimed at the host only
    )
    hosts.append(proc)
    HOST_PIDS.add(proc.pid)
    wait_for_file(ws / "ready")
    expected = 4 if escapee else 3
    wait_until(lambda: len(commands_with(token, program=b"sleep\0")) == expected, f"the {expected} sleeps to run")
    return token


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_host_signal_ends_every_command_then_the_host(
    host: tuple[Path, list[subprocess.Popen[bytes]]], mode: str, signum: signal.Signals
) -> None:
    ws, hosts = host
    token = start_host(ws, hosts, mode)
    hosts[0].send_signal(signum)
    assert hosts[0].wait(30) == -signum  # the default action still ends the host
    wait_until(lambda: not commands_with(token), f"every command to end after {signum.name}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_the_hosts_own_handler_still_runs(host: tuple[Path, list[subprocess.Popen[bytes]]], signum: int) -> None:
    ws, hosts = host
    token = start_host(ws, hosts, "off", own_handler=True)
    hosts[0].send_signal(signum)
    wait_until(lambda: not commands_with(token), "every command to end")
    assert wait_for_file(ws / "host-handler-ran") == signal.Signals(signum).name
    assert hosts[0].poll() is None  # the host chose to keep running


@pytest.mark.parametrize("mode", MODES)
def test_commands_die_with_a_sigkilled_host(host: tuple[Path, list[subprocess.Popen[bytes]]], mode: str) -> None:
    """Even one that left its process group (setsid)."""
    ws, hosts = host
    token = start_host(ws, hosts, mode, escapee=True)
    hosts[0].kill()
    hosts[0].wait(30)
    wait_until(lambda: not commands_with(token), "every command to die with the host")
