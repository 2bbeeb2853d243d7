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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolroute.builtins._process import landlock_exec
from toolroute.context import SandboxMode

Kind = Literal["bubblewrap", "landlock", "none"]

HELPER = Path(landlock_exec.__file__).resolve()
PROBE_TIMEOUT = 10.0


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


def describe(mode: SandboxMode, network: bool) -> dict[str, object]:
    """What a command would run under, for traces and `toolroute tools`."""
    try:
        kind = resolve_kind(mode)
    except SandboxUnavailable as exc:
        return {"mode": mode, "confinement": "unavailable", "reason": str(exc)}
    out: dict[str, object] = {"mode": mode, "confinement": kind}
    if kind != "none":
        out["network"] = network
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

    def folder(self, workspace: Path) -> Path:
        with self._lock:
            if self._base is None:
                self._base = Path(tempfile.mkdtemp(prefix="toolroute-tmp-"))
                self._finalizer = weakref.finalize(self, shutil.rmtree, self._base, ignore_errors=True)
            folder = self._base / hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
            folder.mkdir(mode=0o700, exist_ok=True)
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
    network: bool = False

    def writable_paths(self) -> list[Path]:
        return list(dict.fromkeys([self.workspace, *self.writable]))


def _namespaces(*, network: bool) -> list[str]:
    # --unshare-all includes the network namespace; --share-net gives the host's back.
    # No --new-session: commands never have a controlling terminal (see pump.isolation), so the
    # TIOCSTI injection it guards against cannot happen, and a new session would take the
    # command out of the process group that timeouts, stop and shutdown signal.
    return ["--unshare-all", *(["--share-net"] if network else []), "--die-with-parent", "--cap-drop", "ALL"]


def bubblewrap_argv(argv: Sequence[str], plan: SandboxPlan, cwd: Path) -> list[str]:
    """`argv` inside a bubblewrap sandbox. Order matters: later mounts cover earlier ones."""
    args = [bwrap_path(), *_namespaces(network=plan.network)]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(plan.private_tmp), "/tmp"]
    writable = plan.writable_paths()
    for path in writable:
        if path.exists():  # a missing declared folder is skipped, as Landlock does
            args += ["--bind", str(path), str(path)]
    for root in plan.read_only:
        if any(root.is_relative_to(w) for w in writable) and root.exists():
            args += ["--ro-bind", str(root), str(root)]
    return [*args, "--chdir", str(cwd), "--", *argv]


def landlock_argv(argv: Sequence[str], plan: SandboxPlan, status_fd: int) -> list[str]:
    """`argv` run through the Landlock helper; raises SandboxUnavailable first if it cannot work."""
    landlock_abi()
    if not sys.executable:
        raise SandboxUnavailable("no Python interpreter path (sys.executable) to run the Landlock helper")
    paths = [str(p) for p in (*plan.writable_paths(), plan.private_tmp)] + ["/dev/null"]
    flags = [] if plan.network else ["--no-network"]
    return [sys.executable, "-I", "-S", str(HELPER), str(status_fd), str(os.getpid()), *flags, *paths, "--", *argv]


def sandbox_environment(plan: SandboxPlan) -> dict[str, str]:
    """Variables that point a confined command at its private temp folder."""
    tmp = "/tmp" if plan.kind == "bubblewrap" else str(plan.private_tmp)
    return {"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}
