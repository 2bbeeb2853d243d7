"""Which confinement a command runs under, and the argv that applies it.

Two mechanisms, best first:
- **bubblewrap** (`bwrap`, user namespaces): the host mounted read-only, the workspace and declared
  folders writable, a private /tmp per workspace, no network unless allowed, no capabilities, and
  the whole sandbox killed when the host dies. Metadata changes (chmod, chown, utime) outside the
  writable folders fail like writes (read-only mounts).
- **landlock** (+ seccomp): the fallback where user namespaces are unavailable. Writes are denied
  outside the writable folders and a private temp folder (TMPDIR); seccomp refuses non-unix
  sockets unless network is allowed. Landlock has no right for metadata changes, so chmod, chown
  and utime outside the workspace are NOT refused under this fallback.

What a command can *read* is the view (`SandboxView`, docs/bash.md "What a command sees"):
- **host**: the whole host file system, read-only (the library default, for a local agent that
  runs on its own user's machine);
- **minimal**: only the system folders a command needs (`SYSTEM_PATHS`, less `HIDDEN_PATHS`),
  the workspace, its private /tmp and the declared roots; nothing of other workspaces, home
  folders or the server's files. Served mode uses it for every tenant. Under Landlock, /proc is
  not readable at all in this view, and signals and abstract unix sockets are scoped to the
  command (ABI 6+).

A context may also name a uid (`sandbox_uid`) that its commands run as: served mode gives each
tenant its own, so that even a mount mistake does not reach files of another tenant or the host.

The mode a context asks for (`SandboxMode`) resolves to one `Kind` per host, probed once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolroute.builtins._process import egress, landlock_exec, netns
from toolroute.context import SandboxMode, SandboxNetwork, SandboxView

Kind = Literal["bubblewrap", "landlock", "none"]

HELPER = Path(landlock_exec.__file__).resolve()
PROBE_TIMEOUT = 10.0

# The minimal view's system folders: what programs need to run (binaries, libraries, their
# configuration). Missing ones are skipped; a symlink (/bin -> usr/bin) is kept as a symlink.
SYSTEM_PATHS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Beneath those, what holds secrets of the host: hidden in the minimal view (an empty file or
# folder under bubblewrap, no rule under Landlock). Contexts can add more (`sandbox_hidden`).
HIDDEN_PATHS: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/krb5.keytab",
    "/etc/toolroute",
)
# Device files a command may read (and write, for /dev/null) under Landlock's minimal view.
DEVICES: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class SandboxUnavailable(RuntimeError):
    """The asked-for confinement cannot be used here; the message says why."""


# ---- probing ------------------------------------------------------------------------------


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, probed once; raises SandboxUnavailable."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"Landlock is Linux-only; this is {sys.platform}")
    try:
        return landlock_exec.abi_version()
    except OSError as exc:
        raise SandboxUnavailable(f"this kernel does not offer Landlock ({exc})") from None


@functools.cache
def bwrap_path() -> str:
    """The bwrap executable that runs a sandbox here, probed once; raises SandboxUnavailable."""
    if not sys.platform.startswith("linux"):
        # Seatbelt (sandbox-exec, as Codex uses on macOS) is not implemented: refuse, never run
        # a command less confined than asked.
        raise SandboxUnavailable(
            f"toolroute confines commands with bubblewrap or Landlock, which are Linux's; on {sys.platform} "
            "there is no sandbox yet (macOS Seatbelt is not supported), so a command that asks for one is refused"
        )
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable("bubblewrap is not installed (Debian/Ubuntu package: bubblewrap)")
    probe = [path, *_namespaces(network=False), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap could not be run: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise SandboxUnavailable(f"bubblewrap cannot create a sandbox here (user namespaces?): {reason}")
    return path


def resolve_kind(mode: SandboxMode) -> Kind:
    """The confinement `mode` gets on this host. `auto` falls back to none; every other mode
    except `off` raises SandboxUnavailable rather than run a command less confined than asked."""
    if mode == "off":
        return "none"
    if mode == "landlock":
        landlock_abi()
        return "landlock"
    try:
        bwrap_path()
        return "bubblewrap"
    except SandboxUnavailable as no_bwrap:
        if mode == "bubblewrap":
            raise
        try:
            landlock_abi()
            return "landlock"
        except SandboxUnavailable as no_landlock:
            if mode == "auto":
                return "none"
            raise SandboxUnavailable(f"{no_bwrap}; and {no_landlock}") from None


def network_label(network: SandboxNetwork) -> bool | str:
    """What results say of a network policy: false (none), "internet", "host" or "allowlist"."""
    if network == "none":
        return False
    return network if isinstance(network, str) else "allowlist"


def describe(mode: SandboxMode, network: SandboxNetwork, view: SandboxView = "host") -> dict[str, object]:
    """What a command would run under, for traces and `toolroute tools`."""
    try:
        kind = resolve_kind(mode)
    except SandboxUnavailable as exc:
        return {"mode": mode, "confinement": "unavailable", "reason": str(exc)}
    out: dict[str, object] = {"mode": mode, "confinement": kind}
    if kind != "none":
        out["network"] = network_label(network)
        if isinstance(network, tuple):
            out["networkAllow"] = list(network)
        out["view"] = view
    if kind == "landlock":
        out["notConfined"] = "metadata changes (chmod, chown, utime) outside the writable folders"
    return out


# ---- the private /tmp of each workspace ----------------------------------------------------


class PrivateTmp:
    """One private temp folder per workspace, made on first use, removed on close.

    They live in one 0700 folder of the host's temp dir, outside every workspace; a sandboxed
    command sees its workspace's folder as /tmp (bubblewrap) or as TMPDIR (Landlock).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: Path | None = None
        self._finalizer: weakref.finalize[..., PrivateTmp] | None = None

    def folder(self, workspace: Path, uid: int | None = None) -> Path:
        """The workspace's temp folder; owned by `uid` (the commands' own) when one is given."""
        with self._lock:
            if self._base is None:
                self._base = Path(tempfile.mkdtemp(prefix="toolroute-tmp-"))
                self._finalizer = weakref.finalize(self, shutil.rmtree, self._base, ignore_errors=True)
                # Passable (never listable) by the commands' uids, so each reaches its own folder only.
                os.chmod(self._base, 0o711)
            folder = self._base / hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
            folder.mkdir(mode=0o700, exist_ok=True)
            if uid is not None and folder.stat().st_uid != uid:
                os.chown(folder, uid, uid)
            return folder

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


# ---- building the confined argv -------------------------------------------------------------


@dataclass(frozen=True)
class SandboxPlan:
    """How one command is confined."""

    kind: Literal["bubblewrap", "landlock"]
    workspace: Path
    private_tmp: Path
    writable: tuple[Path, ...] = ()  # declared folders writable beside the workspace
    read_only: tuple[Path, ...] = ()  # read-only roots, kept read-only inside writable folders
    network: SandboxNetwork = "none"
    view: SandboxView = "host"
    hidden: tuple[Path, ...] = ()  # hidden beside HIDDEN_PATHS in the minimal view
    uid: int | None = None  # the uid (and gid) commands run as; None: the host's own
    dns: str | None = None  # the resolver the network's DNS asks (None: the host's)
    owner: str | None = None  # whom an allowlist's proxy reports refusals for

    @property
    def own_network(self) -> bool:
        """Whether commands get a network namespace of their own with user-mode NAT (netns.py):
        "internet" or an allowlist; "none" has one with a loopback only, "host" the host's."""
        return self.network not in ("none", "host")

    @property
    def unix_sockets(self) -> bool:
        """Whether commands may open unix sockets. Not in the minimal view where the sandbox
        cannot hide the host's: Landlock has no say over `connect()` on a named socket (a
        database's, the registry's), and bubblewrap sharing the host's network shares its
        abstract sockets. bubblewrap in a network namespace of its own (no network, "internet",
        an allowlist) hides both (its own mount and network namespaces), so a tenant's own
        sockets in its workspace keep working there."""
        return self.view != "minimal" or (self.kind == "bubblewrap" and self.network != "host")

    def writable_paths(self) -> list[Path]:
        return list(dict.fromkeys([self.workspace, *self.writable]))

    def hidden_paths(self) -> list[Path]:
        return list(dict.fromkeys([*(Path(p) for p in HIDDEN_PATHS), *self.hidden]))


def _covers(outer: Path, inner: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


def readable_grants(paths: Sequence[Path], hidden: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """What to grant so that everything beneath `paths` is readable except `hidden`: the paths
    readable whole, and the folders only listable. Landlock rules only add, so a secret inside a
    granted folder can be left out only by granting that folder's other children one by one
    (the folder itself stays listable, so `ls /etc` works; its hidden entries' names show)."""
    grants: list[Path] = []
    listable: list[Path] = []
    for path in paths:
        if any(_covers(h, path) for h in hidden) or not os.path.lexists(path):
            continue
        if not any(_covers(path, h) for h in hidden) or not path.is_dir() or path.is_symlink():
            grants.append(path)
            continue
        try:
            children = sorted(path.iterdir())
        except OSError:
            continue
        listable.append(path)
        more, more_listable = readable_grants(children, hidden)
        grants += more
        listable += more_listable
    return grants, listable


@functools.lru_cache(maxsize=16)
def system_grants(hidden: tuple[Path, ...]) -> tuple[list[Path], list[Path]]:
    """`readable_grants` of the system folders, listed once per process (17 ms a command
    otherwise): an entry made in /etc later is simply not granted, which fails closed."""
    return readable_grants([Path(p) for p in SYSTEM_PATHS], hidden)


TMP = Path("/tmp")  # where bubblewrap mounts a command's private temporary folder


def visible(path: Path, plan: SandboxPlan) -> bool:
    """Whether `path` lies in what a command of `plan` can read (the minimal view's folders).
    Under bubblewrap the host's /tmp is covered by the private one in either view: of it only
    what is bound again (the workspace, declared folders) shows."""
    if plan.kind == "bubblewrap" and _covers(TMP, path):
        return any(_covers(root, path) for root in (*plan.writable_paths(), *plan.read_only))
    if plan.view == "host":
        return True
    if any(_covers(h, path) for h in plan.hidden_paths()):
        return False
    shown = [*(Path(p) for p in SYSTEM_PATHS), *plan.writable_paths(), *plan.read_only, plan.private_tmp]
    return any(_covers(root, path) for root in shown)


def _namespaces(*, network: bool, die_with_parent: bool = True) -> list[str]:
    # --unshare-all includes the network namespace; --share-net keeps the one bwrap started in
    # (the host's, or pasta's). No --new-session: commands never have a controlling terminal
    # (see pump.isolation), so the TIOCSTI injection it guards against cannot happen, and a new session would take the
    # command out of the process group that timeouts, stop and shutdown signal.
    share = ["--share-net"] if network else []
    return ["--unshare-all", *share, *(["--die-with-parent"] if die_with_parent else []), "--cap-drop", "ALL"]


def _minimal_root(plan: SandboxPlan) -> list[str]:
    """bubblewrap arguments for the minimal view's system part: the system folders read-only
    (symlinks such as /bin -> usr/bin kept as symlinks), then each hidden path covered."""
    args: list[str] = []
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.exists():
            args += ["--ro-bind", name, name]
    for hidden in plan.hidden_paths():
        if not any(_covers(Path(s), hidden) for s in SYSTEM_PATHS) or not os.path.lexists(hidden):
            continue  # only what the system folders would show needs covering
        if hidden.is_dir() and not hidden.is_symlink():
            args += ["--tmpfs", str(hidden)]
        else:
            args += ["--ro-bind", "/dev/null", str(hidden)]
    return args


def socket_filter_fd(plan: SandboxPlan) -> int | None:
    """For bubblewrap's `--seccomp`: a descriptor holding the filter that refuses unix sockets,
    when `plan`'s commands may not open them (None otherwise). bubblewrap reads it from its
    current offset, so each command gets its own; the caller closes it once bwrap has started."""
    if plan.unix_sockets:
        return None
    program = landlock_exec.socket_filter(os.uname().machine, network=plan.network != "none", unix=False)
    fd = os.memfd_create("toolroute-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def bubblewrap_argv(
    argv: Sequence[str], plan: SandboxPlan, cwd: Path, seccomp_fd: int | None = None, *, die_with_parent: bool = True
) -> list[str]:
    """`argv` inside a bubblewrap sandbox (with `seccomp_fd`, `socket_filter_fd`'s filter
    applied). Order matters: later mounts cover earlier ones."""
    args = [bwrap_path(), *_namespaces(network=plan.network != "none", die_with_parent=die_with_parent)]
    if plan.own_network:
        # A user namespace nested in pasta's: the command holds no capability over the network
        # namespace (pasta's user namespace owns it), so its rules stay.
        uid = os.getuid() if plan.uid is None else plan.uid
        args += ["--unshare-user", "--uid", str(uid), "--gid", str(uid)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += _minimal_root(plan) if plan.view == "minimal" else ["--ro-bind", "/", "/"]
    if plan.own_network:
        args += ["--ro-bind", str(netns.resolv_conf(plan.network, plan.dns)), os.path.realpath("/etc/resolv.conf")]
    args += ["--dev", "/dev", "--proc", "/proc", "--bind", str(plan.private_tmp), "/tmp"]
    writable = plan.writable_paths()
    for path in writable:
        if path.exists():  # a missing declared folder is skipped, as Landlock does
            args += ["--bind", str(path), str(path)]
    for root in plan.read_only:
        # Inside a writable folder a read-only root must be bound again; in the minimal view a
        # read-only root anywhere is shown only by being bound.
        inside = any(root.is_relative_to(w) for w in writable)
        if (inside or plan.view == "minimal") and root.exists():
            args += ["--ro-bind", str(root), str(root)]
    args += ["--chdir", str(cwd), "--", *argv]
    return in_network(args, plan) if plan.own_network else args


def in_network(argv: list[str], plan: SandboxPlan) -> list[str]:
    """`argv` (bwrap's) started in a network namespace of its own (netns.py)."""
    proxy = None
    if isinstance(plan.network, tuple):
        endpoint = egress.EGRESS.endpoint(plan.network, plan.owner, plan.dns)
        proxy = (endpoint.proxy_port, endpoint.dns_port)
    try:
        return netns.wrap(argv, plan.network, uid=plan.uid, dns=plan.dns, proxy=proxy)
    except netns.NetworkUnavailable as exc:
        raise SandboxUnavailable(str(exc)) from None


def check_network(plan: SandboxPlan) -> None:
    """Raise SandboxUnavailable when `plan`'s network cannot be given here (at start-up, so a
    server refuses to start rather than run commands without the network it was asked for)."""
    if not plan.own_network:
        return
    if plan.kind != "bubblewrap":
        raise SandboxUnavailable(
            "a network of a command's own (internet or an allowlist) needs bubblewrap and user namespaces; "
            "the Landlock fallback shares the host's network namespace, so it is refused, never shared"
        )
    try:
        netns.tools()
        netns.probe(plan.uid)
    except netns.NetworkUnavailable as exc:
        raise SandboxUnavailable(str(exc)) from None


def _helper(status_fd: int | None, flags: Sequence[str]) -> list[str]:
    """The Landlock helper's argv up to its `--` (landlock_exec.py); `status_fd` None sends a
    failure's reason to stderr."""
    if not sys.executable:
        raise SandboxUnavailable("no Python interpreter path (sys.executable) to run the Landlock helper")
    status = "-" if status_fd is None else str(status_fd)
    return [sys.executable, "-I", "-S", str(HELPER), status, str(os.getpid()), *flags]


def landlock_argv(
    argv: Sequence[str], plan: SandboxPlan, status_fd: int | None, *, die_with_parent: bool = True
) -> list[str]:
    """`argv` run through the Landlock helper; raises SandboxUnavailable first if it cannot work."""
    landlock_abi()
    check_network(plan)
    paths = [str(p) for p in (*plan.writable_paths(), plan.private_tmp)] + ["/dev/null"]
    flags = [] if plan.network != "none" else ["--no-network"]
    if not plan.unix_sockets:
        flags.append("--no-unix-sockets")
    if plan.uid is not None:
        flags.append(f"--uid={plan.uid}")
    if not die_with_parent:
        flags.append("--no-pdeathsig")
    if plan.view == "minimal":
        system, listable = system_grants(tuple(plan.hidden_paths()))
        readable = [*system, *plan.read_only, *(Path(d) for d in DEVICES)]
        flags += [f"--read={p}" for p in readable] + [f"--list={p}" for p in listable]
    return [*_helper(status_fd, [*flags, *paths]), "--", *argv]


# The descriptor a server's bubblewrap reads its seccomp filter from (0-2 are its stdio).
SERVER_SECCOMP_FD = 3


def server_argv(argv: Sequence[str], plan: SandboxPlan, cwd: Path) -> list[str]:
    """`argv`, a long-lived server a tenant configured (its own stdio MCP server), confined as
    `plan`'s commands are, for a spawner that can neither pass descriptors nor switch uids nor
    promise the thread it forks from (the MCP SDK's): no parent-death signal (the host's
    watchdog and the SDK's own shutdown end it), and bubblewrap started through the helper,
    which drops to the tenant's uid and makes the socket filter's descriptor."""
    if plan.kind == "landlock":
        return landlock_argv([*argv], plan, None, die_with_parent=False)
    seccomp = None if plan.unix_sockets else SERVER_SECCOMP_FD
    inner = bubblewrap_argv(argv, plan, cwd, seccomp, die_with_parent=False)
    if plan.uid is None and seccomp is None:
        return inner
    flags = ["--no-landlock", "--no-pdeathsig"]
    if plan.uid is not None:
        flags.append(f"--uid={plan.uid}")
    if seccomp is not None:
        flags += [f"--seccomp-fd={seccomp}", *([] if plan.network != "none" else ["--no-network"])]
    return [*_helper(None, flags), "--", *inner]


# Variables that name host folders a command of the minimal view cannot see (its HOME becomes
# the workspace): dropped rather than left pointing at nothing, or at the server's files.
HOST_FOLDER_VARIABLES = (
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
)


def sandbox_environment(plan: SandboxPlan, env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a confined command: pointed at its private temp folder; in the minimal view
    also HOME at the workspace, host folders' variables dropped, and PATH less the folders it
    cannot see, so a program is looked up where it can run (Landlock lets a command stat what it
    may not execute)."""
    tmp = "/tmp" if plan.kind == "bubblewrap" else str(plan.private_tmp)
    out = {**env, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}
    if isinstance(plan.network, tuple):  # the proxy is the only way out: say where it is
        out.update(egress.EGRESS.endpoint(plan.network, plan.owner, plan.dns).environment())
    if plan.view == "minimal":
        for name in HOST_FOLDER_VARIABLES:
            out.pop(name, None)
        out["HOME"] = str(plan.workspace)
        if "PATH" in out:
            out["PATH"] = visible_search_path(out["PATH"], plan)
    return out


@functools.lru_cache(maxsize=256)
def visible_search_path(search_path: str, plan: SandboxPlan) -> str:
    """`search_path` (a PATH) less the folders `plan`'s commands cannot see; cached, as every
    command of a context asks the same (2 ms of path arithmetic otherwise)."""
    return os.pathsep.join(p for p in search_path.split(os.pathsep) if p and visible(Path(p), plan))
