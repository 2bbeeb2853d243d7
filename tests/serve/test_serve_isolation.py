"""Tenant isolation below the router, as deployed: a real `toolroute serve` over HTTP with API
keys, workspaces, registry and key file outside /tmp (a sandbox replaces /tmp, which would hide a
leak), under bubblewrap and under the Landlock fallback. bob's commands must not reach alice's
workspace, the registry, its key, the server's environment or the server user's home, by any
path: absolute, relative, through /proc, or through symlinks bob makes himself. Every attack runs
again with the search index daemon on, and under a server that is not root (tenants' commands
then share its uid), where Landlock alone would let bob pass the daemon's folder: his commands may
open no unix socket there at all.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from _index_daemon_helpers import launched_daemons
from _mcp_helpers import tenant_stdio
from _serve_helpers import http_server_process, outside_tmp, run_cli, tool_env, toolroute_exe
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute import _platform
from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind
from toolroute.serve.secrets import SecretBox
from toolroute.serve.store import UserStore

ALICE_SECRET = "alice-private-7f3a9c"
UPSTREAM_TOKEN = "ghp-upstream-token-5be1d2"
HOST_SECRET = "host-environment-secret-c41e"
MECHANISMS = ("bubblewrap", "landlock")


def _available(mechanism: str) -> str | None:
    try:
        resolve_kind(mechanism)  # type: ignore[arg-type]  # raises where that mechanism cannot run
    except SandboxUnavailable as exc:
        return str(exc)
    return None


@dataclass
class Deployment:
    url: str
    server_pid: int
    base: Path
    keys: dict[str, str]
    registry: Path
    key_file: Path
    # Each tenant's commands run as a uid of its own (a root server); else as the server's uid.
    tenant_uids: bool
    daemon: bool  # queries go to the index daemon (the setting 1); else the default


# Each mechanism plain, and with the search index daemon on (a long-lived process of the
# server's user that holds every tenant's index, listening on a socket in the cache folder);
# and Landlock with the daemon under a server that is not root, so that tenants' commands run as
# the server's own uid (no per-tenant uids): the deployment where only Landlock and the daemon's
# key stand between a tenant and the rest. (Run as a user, the suite's server is unprivileged
# in every deployment.)
DEPLOYMENTS = [(m, daemon, False) for daemon in (False, True) for m in MECHANISMS] + [("landlock", True, True)]
# A server that is not root, run by a root test: in a user namespace of its own, as uid 1000
# there (the same uid outside, without its capabilities), so it still reaches the interpreter
# wherever that was installed; it gives no tenant a uid of its own, as an unprivileged one would.
UNPRIVILEGED = ("unshare", "--user", "--map-user=1000", "--map-group=1000")


def _unprivileged_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the other deployments already run their server unprivileged"
    try:
        probe = subprocess.run([*UNPRIVILEGED, "true"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        return f"unshare: {exc}"
    return None if probe.returncode == 0 else f"no user namespace: {probe.stderr.strip()}"


def _deployment_id(case: tuple[str, bool, bool]) -> str:
    mechanism, daemon, unprivileged = case
    return mechanism + "-daemon" * daemon + "-unprivileged" * unprivileged


@pytest.fixture(scope="module", params=DEPLOYMENTS, ids=[_deployment_id(c) for c in DEPLOYMENTS])
def deployment(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    mechanism, daemon, unprivileged = request.param
    missing = _available(mechanism)
    if missing:
        pytest.skip(f"{mechanism}: {missing}")
    if daemon and not _platform.LINUX_NATIVE:
        pytest.skip("the index daemon is Linux's (inotify, SCM_RIGHTS)")
    if unprivileged and (why := _unprivileged_unavailable()):
        pytest.skip(why)
    prefix = UNPRIVILEGED if unprivileged else ()
    base = outside_tmp()
    env: dict[str, str] = {}
    try:
        registry = base / "registry" / "users.db"
        registry.parent.mkdir()
        config = base / "config"
        key_file = config / "toolroute" / "store.key"
        # The server's search index cache (alice's index is saved there) outside /tmp too.
        env = tool_env(
            XDG_CONFIG_HOME=str(config), XDG_CACHE_HOME=str(base / "cache"), TOOLROUTE_TEST_HOST_SECRET=HOST_SECRET
        )
        if daemon:
            env["TOOLROUTE_SEARCH_INDEX_DAEMON"] = "1"
        else:  # the default, set so that any process but a server would start one at once
            env.pop("TOOLROUTE_SEARCH_INDEX_DAEMON", None)
            env["TOOLROUTE_SEARCH_INDEX_DAEMON_AFTER"] = "0"
        store_url = f"sqlite:///{registry}"
        saved = os.environ.get("XDG_CONFIG_HOME")
        os.environ["XDG_CONFIG_HOME"] = str(config)
        try:
            with UserStore(store_url, SecretBox()) as store:
                keys = {}
                for user in ("alice", "bob"):
                    store.add_user(user)
                    keys[user] = store.add_key(user)
                store.add_server("alice", "gh", tenant_stdio("alice-gh", env={"GH_TOKEN": UPSTREAM_TOKEN}))
        finally:
            if saved is None:
                os.environ.pop("XDG_CONFIG_HOME")
            else:
                os.environ["XDG_CONFIG_HOME"] = saved
        args = [
            *("--functions", "bash,read_file,write_file,grep", "--api-keys", "--store", store_url),
            *("--workspace-template", str(base / "ws" / "{user}"), "--sandbox", mechanism),
        ]
        tenant_uids = os.geteuid() == 0 and not unprivileged
        with http_server_process(args, env, prefix) as (proc, url):
            deployment = Deployment(url, proc.pid, base, keys, registry, key_file, tenant_uids, daemon)
            _call(deployment, "alice", "write_file", {"path": "notes.txt", "content": ALICE_SECRET + "\n"})
            # The second query starts alice's index (in the server, or in the daemon the first
            # one started); it is saved once built.
            deadline = time.monotonic() + 30
            while not _saved_indexes(deployment) or (daemon and not _daemon_sockets(deployment)):
                assert time.monotonic() < deadline, "alice's search index was not saved"
                assert ALICE_SECRET in _call(deployment, "alice", "grep", {"pattern": ALICE_SECRET})
                time.sleep(0.05)
            yield deployment
    finally:
        if daemon and env:  # as the server's user: the daemon's name is that user's
            stop = [*prefix, toolroute_exe(), "index", "stop"]
            subprocess.run(stop, env=env, capture_output=True, timeout=30, check=False)
        shutil.rmtree(base, ignore_errors=True)


def _cache_folder(d: Deployment) -> Path:
    return d.base / "cache" / "toolroute" / "index"


def _saved_indexes(d: Deployment) -> list[Path]:
    return list(_cache_folder(d).glob("[0-9a-f]*.idx"))


def _daemon_sockets(d: Deployment) -> list[Path]:
    return list(_cache_folder(d).glob("daemon-*.sock"))


async def _session_call(url: str, bearer: str, name: str, arguments: dict[str, Any]) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return await client.call_tool(name, arguments)


def _call(d: Deployment, user: str, name: str, arguments: dict[str, Any]) -> str:
    result = anyio.run(_session_call, d.url, d.keys[user], name, arguments)
    text: str = result.content[0].text
    assert not result.is_error, text
    return text


def bash(d: Deployment, user: str, command: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(_call(d, user, "bash", {"command": command}))
    return out


def _secrets(d: Deployment) -> list[str]:
    return [ALICE_SECRET, UPSTREAM_TOKEN, HOST_SECRET, d.key_file.read_text().strip()]


def _leaks(d: Deployment, out: dict[str, Any]) -> list[str]:
    seen = out["stdout"] + out["stderr"]
    return [s for s in _secrets(d) if s in seen]


def test_the_deployment_is_set_up_the_way_users_deploy(deployment: Deployment) -> None:
    # Everything an attack aims at lies outside /tmp, and alice's bytes really are there.
    tmp = Path(tempfile.gettempdir()).resolve()
    for path in (deployment.base, deployment.registry, deployment.key_file, deployment.base / "cache"):
        assert not path.resolve().is_relative_to(tmp)
    assert (deployment.base / "ws" / "alice" / "notes.txt").read_text() == ALICE_SECRET + "\n"
    assert deployment.key_file.is_file()
    # The server's own environment holds the host secret (so /proc/<pid>/environ would show it).
    assert HOST_SECRET.encode() in Path(f"/proc/{deployment.server_pid}/environ").read_bytes()


def test_commands_run_with_a_minimal_view_named_in_the_trace(deployment: Deployment) -> None:
    out = bash(deployment, "bob", "echo mine > own.txt && cat own.txt")
    assert out["exitCode"] == 0 and out["stdout"] == "mine\n"
    assert out["sandbox"]["view"] == "minimal"
    assert out["sandbox"]["confinement"] in MECHANISMS


def test_bobs_commands_cannot_read_list_or_stat_what_is_not_his(deployment: Deployment) -> None:
    d = deployment
    alice = d.base / "ws" / "alice"
    targets = [
        alice / "notes.txt",
        alice,
        d.base / "ws",
        d.registry,
        d.registry.parent,
        d.key_file,
        d.base / "cache" / "toolroute" / "index",  # alice's saved search index
        Path.home(),
        Path(f"/proc/{d.server_pid}/environ"),
        Path("/proc/1/environ"),
    ]
    own = d.base / "ws" / "bob"
    foreign = [t for t in targets if not own.is_relative_to(t) and t.parts[1] != "proc"]
    for target in targets:
        # Nothing read, nothing listed: nothing on stdout (a folder above bob's own workspace
        # lists bob's folder alone).
        out = bash(d, "bob", f"cat {target}; ls -1a {target}/; head -c 4096 {target}/*; true")
        assert _leaks(d, out) == [] and "alice" not in out["stdout"], (target, out)
        # (/proc/1 under bubblewrap is the sandbox's own init, holding the command's own variables.)
        if target in foreign:
            assert out["stdout"] == "", (target, out)
    # Landlock has no right for stat: there, what a tenant's uid cannot search stays unseen.
    unseen = foreign if _mechanism(d) == "bubblewrap" else [alice / "notes.txt", d.key_file]
    if _mechanism(d) == "landlock" and not d.tenant_uids:
        unseen = []  # without per-tenant uids, Landlock lets any path be stat'ed (docs/deploy.md)
    for target in unseen:
        out = bash(d, "bob", f"stat -c %s:%i {target}")
        assert out["exitCode"] != 0 and out["stdout"] == "", (target, out)
    # A search of everything the command can see finds none of alice's bytes either.
    skip = "--exclude-dir=proc --exclude-dir=sys --exclude-dir=dev"
    out = bash(d, "bob", f"grep -rIl {skip} {ALICE_SECRET} / 2>/dev/null")
    assert out["stdout"] == "" and _leaks(d, out) == []


CONNECT = """
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
except OSError as exc:
    print("unreachable:", exc)
    sys.exit()
print("connected")
"""


def test_a_server_starts_no_index_daemon_by_default(deployment: Deployment) -> None:
    """The server holds its users' indexes itself: by default (the variable unset, every answer
    counted slow) it starts no daemon, where a CLI process would."""
    d = deployment
    if d.daemon:
        pytest.skip("this deployment runs the index daemon")
    for _ in range(3):
        assert ALICE_SECRET in _call(d, "alice", "grep", {"pattern": ALICE_SECRET})
    # The server's environment names the cache's parent (XDG_CACHE_HOME), not the cache itself.
    launched = launched_daemons(d.base / "cache", "XDG_CACHE_HOME")
    assert not launched and not _daemon_sockets(d), "the server started an index daemon"


def test_the_index_daemons_socket_and_key_are_beyond_every_tenants_reach(deployment: Deployment) -> None:
    d = deployment
    sockets = _daemon_sockets(d)
    if not sockets:
        pytest.skip("this deployment runs no index daemon")
    sock = sockets[0]
    key_file = sock.with_suffix(".key")
    key = key_file.read_bytes()
    assert len(key) == 32 and key_file.stat().st_mode & 0o777 == 0o600
    daemon_pids = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and sock.name.encode() in _cmdline(p)]
    assert daemon_pids, "no daemon process serves the socket"
    mechanism = _mechanism(d)  # (bob's workspace is made here)
    same_uid = not d.tenant_uids and mechanism == "landlock"
    (script := d.base / "ws" / "bob" / "connect.py").write_text(CONNECT)
    script.chmod(0o644)
    # The daemon holds alice's index. Neither tenant can list the folder its socket lies in, nor
    # read its key; nor reach the socket by its path, or through the server's or the daemon's
    # /proc entries. Landlock does not govern connect(), so there a tenant's commands may open
    # no unix socket at all (seccomp): even one sharing the server's uid, who could pass the
    # socket's folder, is refused before it can say anything to the daemon.
    paths = [str(sock), *(f"/proc/{pid}/root{sock}" for pid in [d.server_pid, *daemon_pids])]
    for user in ("alice", "bob"):
        out = bash(d, user, f"ls -a {sock.parent}; base64 -w0 {key_file}")
        assert out["stdout"] == "" and sock.name not in out["stderr"], (user, out)
        for path in paths:
            out = bash(d, user, f"python3 {d.base}/ws/bob/connect.py {path}" if user == "bob" else f"stat {path}")
            if user == "bob":
                assert out["stdout"].startswith("unreachable"), out  # python3 ran, and was refused
            # (a command sharing the server's uid under Landlock may stat the socket: docs/deploy.md)
            if not same_uid or path != str(sock):
                assert "connected" not in out["stdout"] and "socket" not in out["stdout"], (user, path, out)
    if mechanism == "landlock":
        out = bash(d, "bob", f"python3 {d.base}/ws/bob/connect.py {sock}")
        assert out["stdout"].startswith("unreachable: [Errno 13]"), out  # the socket itself is refused
    # And the daemon still answers alice's queries with alice's bytes alone.
    assert "notes.txt" in _call(d, "alice", "grep", {"pattern": ALICE_SECRET})
    assert _call(d, "bob", "grep", {"pattern": ALICE_SECRET}).startswith("No matches")


def _cmdline(proc: Path) -> bytes:
    try:
        return proc.joinpath("cmdline").read_bytes()
    except OSError:
        return b""


def _mechanism(d: Deployment) -> str:
    return str(bash(d, "bob", "true")["sandbox"]["confinement"])


def test_a_tenants_own_stdio_server_runs_in_that_tenants_sandbox(deployment: Deployment) -> None:
    """alice's upstream server (her registry entry) is her program: it runs as her uid, in her
    workspace, in the minimal view, and reaches nothing her commands could not: not bob's
    workspace, not the list of workspaces, not the registry or its key, no host unix socket."""
    d = deployment
    alice = d.base / "ws" / "alice"
    me = json.loads(_call(d, "alice", "user_alice_tool_whoami", {}))
    assert me["cwd"] == str(alice) and me["home"] == str(alice), me
    assert "GH_TOKEN" in me["env"] and "TOOLROUTE_TEST_HOST_SECRET" not in me["env"], me
    if d.tenant_uids:
        assert me["uid"] == alice.stat().st_uid != os.geteuid(), me
    bash(d, "bob", "echo bobs-own > mine.txt")  # (bob's workspace exists)
    sock = d.base / "host.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(sock))
        sock.chmod(0o777)
        listener.listen(4)
        probes = {
            "listdir": [d.base / "ws", d.base, d.registry.parent, d.key_file.parent, Path("/root")],
            "read": [d.base / "ws" / "bob" / "mine.txt", d.registry, d.key_file, Path(f"/proc/{d.server_pid}/environ")],
            "connect": [sock],
        }
        for tool, paths in probes.items():
            for path in paths:
                arguments = {"path": str(path)}
                result = anyio.run(_session_call, d.url, d.keys["alice"], f"user_alice_tool_{tool}", arguments)
                text = result.content[0].text
                # (bubblewrap makes the folders above her workspace to mount it: they list it alone)
                shown = set() if result.is_error or tool != "listdir" else set(text.split())
                assert result.is_error or shown <= {"alice", "ws"}, (tool, path, text)
                assert "bobs-own" not in text and not _leaked(d, text), (tool, path, text)
    # Her own files she reaches, as her commands do.
    assert _call(d, "alice", "user_alice_tool_read", {"path": "notes.txt"}) == ALICE_SECRET + "\n"


def _leaked(d: Deployment, text: str) -> list[str]:
    return [s for s in _secrets(d) if s in text and s != ALICE_SECRET]


def test_each_tenants_commands_run_as_a_uid_of_its_own_that_owns_its_workspace(deployment: Deployment) -> None:
    d = deployment
    if not d.tenant_uids:
        pytest.skip("per-tenant uids need the server to run as root")
    uids = {user: bash(d, user, "id -u")["stdout"].strip() for user in ("alice", "bob")}
    assert uids["alice"] != uids["bob"] and "0" not in uids.values()
    for user, uid in uids.items():
        workspace = d.base / "ws" / user
        assert str(workspace.stat().st_uid) == uid and workspace.stat().st_mode & 0o777 == 0o700
    # What the file tools made for alice belongs to alice's uid, so her commands can change it.
    assert str((d.base / "ws" / "alice" / "notes.txt").stat().st_uid) == uids["alice"]
    out = bash(d, "alice", "echo more >> notes.txt && tail -n 1 notes.txt")
    assert out["stdout"] == "more\n"


def test_the_registry_holds_no_secret_value_in_its_bytes(deployment: Deployment) -> None:
    raw = b"".join(p.read_bytes() for p in deployment.registry.parent.iterdir() if p.is_file())
    assert UPSTREAM_TOKEN.encode() not in raw and b"GH_TOKEN" in raw


PROC_FORMS = ["/proc/self/root{p}", "/proc/1/root{p}", "/proc/{pid}/root{p}", "/proc/{pid}/cwd/../alice/notes.txt"]


@st.composite
def hostile_paths(draw: st.DrawFn, base: Path, server_pid: int) -> tuple[str, str]:
    """(setup command, path) pairs that try to reach alice's notes."""
    notes = str(base / "ws" / "alice" / "notes.txt")
    kind = draw(st.sampled_from(["absolute", "relative", "proc", "symlink", "dots"]))
    if kind == "absolute":
        return "", notes
    if kind == "relative":
        return "", "../" * draw(st.integers(1, 8)) + notes.lstrip("/")
    if kind == "dots":
        return "", "./" + "/".join(["."] * draw(st.integers(0, 3))) + "/../alice/notes.txt"
    if kind == "proc":
        form = draw(st.sampled_from(PROC_FORMS))
        return "", form.format(p=notes, pid=draw(st.sampled_from([server_pid, 1, 2])))
    target = draw(st.sampled_from([notes, str(base / "ws" / "alice"), str(base / "ws"), "/proc/1/cwd"]))
    link = "l" + str(draw(st.integers(0, 10_000)))
    return f"rm -f {link}; ln -s {target} {link}; ", f"{link}" + ("" if target == notes else "/notes.txt")


def test_no_generated_path_reaches_alices_bytes(deployment: Deployment) -> None:
    d = deployment

    @settings(max_examples=25, deadline=None)
    @given(hostile_paths(d.base, d.server_pid))
    def attack(case: tuple[str, str]) -> None:
        setup, path = case
        out = bash(d, "bob", f"{setup}cat {path}; cat {path}/../notes.txt; ls {path}")
        assert _leaks(d, out) == [], (case, out)

    attack()
    # The read_file tool refuses the same paths (confinement by descriptor).
    result = anyio.run(_session_call, d.url, d.keys["bob"], "read_file", {"path": str(d.base / "ws/alice/notes.txt")})
    assert result.is_error and ALICE_SECRET not in result.content[0].text


# ---- served mode refuses to run unsafely ----------------------------------------------------


def _serve_refusal(*args: str) -> str:
    base = outside_tmp()
    try:
        done = run_cli(
            "serve", "--transport", "http", "--port", "0", "--api-keys", "--store", f"sqlite:///{base}/u.db", *args
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode != 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_built_ins_for_many_users_without_a_workspace_each_are_refused() -> None:
    reason = _serve_refusal("--functions", "read_file")
    assert "--workspace-template" in reason and "read_file" in reason


def test_bash_for_many_users_without_a_sandbox_is_refused(tmp_path: Path) -> None:
    reason = _serve_refusal(
        "--functions", "bash", "--sandbox", "off", "--workspace-template", str(tmp_path / "ws" / "{user}")
    )
    assert "--sandbox on" in reason


def test_a_registry_inside_what_commands_see_is_refused(tmp_path: Path) -> None:
    base = outside_tmp()
    try:
        (base / "shared").mkdir()
        done = run_cli(
            *("serve", "--transport", "http", "--port", "0", "--api-keys", "--functions", "read_file"),
            *("--store", f"sqlite:///{base}/shared/u.db", "--read-only-root", str(base / "shared")),
            *("--workspace-template", str(base / "ws" / "{user}")),
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode != 0 and "in a read-only root" in done.stderr, done.stderr


def test_bash_for_many_users_without_a_socket_filter_for_this_machine_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The minimal view keeps commands from the host's unix sockets with a seccomp filter; on a
    machine none is written for, serving bash to many users is refused at start, in one line."""
    from toolroute.builtins._process import landlock_exec
    from toolroute.context import BuiltInToolContext
    from toolroute.errors import ToolArgumentError
    from toolroute.serve.isolation import tenant_base_context

    if _available("landlock") and _available("bubblewrap"):
        pytest.skip("no sandbox works here at all")

    def unknown(machine: str, **_: bool) -> bytes:
        raise landlock_exec.LandlockError(0, "no seccomp socket filter for machine 'riscv64'")

    monkeypatch.setattr(landlock_exec, "socket_filter", unknown)
    base = outside_tmp()
    try:
        context = BuiltInToolContext(base, sandbox="on")
        with pytest.raises(ToolArgumentError, match=r"unix sockets.*riscv64"):
            tenant_base_context(
                context, ["bash"], workspace_template=str(base / "ws" / "{user}"), uids=None, secret_files=[]
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
