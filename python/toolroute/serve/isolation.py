"""Whether built-ins may be served to many users here, and the context every tenant's starts from.

With authentication, any number of users may call, so served mode refuses to start where a
tenant's call could reach another tenant or the server's own files:
- built-ins need a workspace per user (`--workspace-template`): one shared context is never the
  default;
- `bash` needs a sandbox that hides other tenants: bubblewrap or Landlock in the minimal view
  (`sandbox_view="minimal"`), and, when the server is root, a uid of its own per tenant;
- the registry and its key must lie outside every command's view (hidden if a system folder
  holds them) and outside every workspace.
Each refusal is one line saying what to install or which flag to add.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from toolroute.builtins import builtin_tools
from toolroute.builtins._process import landlock_exec, netns
from toolroute.builtins._process.sandbox import SandboxUnavailable, bwrap_path, resolve_kind
from toolroute.codemode import DEFAULT_NAME as CODE_TOOL
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError
from toolroute.serve.identities import DEFAULT_UIDS, template_base

PROBE_TIMEOUT = 10.0


def tenant_uids(requested: range | None) -> range | None:
    """The uid range tenants' commands get: `requested`, else the default when this process can
    switch uids (root), else None (they share the server's uid)."""
    if requested is not None:
        if os.geteuid() != 0:
            raise ToolArgumentError("--tenant-uids needs the server to run as root (it switches uids)")
        return requested
    return DEFAULT_UIDS if os.geteuid() == 0 else None


def _probe_bwrap_as(uid: int) -> None:
    """bubblewrap must start as a tenant's uid (an unprivileged user namespace)."""
    probe = [bwrap_path(), "--unshare-all", "--ro-bind", "/", "/", "--", shutil.which("true") or "/bin/true"]
    try:
        done = subprocess.run(
            probe, user=uid, group=uid, extra_groups=[], capture_output=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap could not be run as uid {uid}: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise SandboxUnavailable(
            f"bubblewrap cannot start as a tenant's uid {uid} (unprivileged user namespaces?): {reason}"
        )


def _require_socket_filter() -> None:
    """The minimal view refuses unix sockets with a seccomp filter (docs/bash.md): one must exist
    for this machine, or every tenant's command would fail to start."""
    try:
        landlock_exec.socket_filter(os.uname().machine, network=False, unix=False)
    except landlock_exec.LandlockError as exc:
        why = f"no seccomp filter keeps a command from the host's unix sockets here: {exc}"
        raise SandboxUnavailable(why) from None


def _require_reachable(folder: Path) -> None:
    """Tenants' uids must be able to pass through every folder above their workspaces."""
    for above in [folder, *folder.parents]:
        try:
            mode = above.stat().st_mode
        except FileNotFoundError:
            continue  # made on first use (0755)
        if not mode & 0o001:
            raise ToolArgumentError(
                f"the tenants' uids cannot reach their workspaces: {above} is mode {mode & 0o777:o}; "
                f"put --workspace-template elsewhere or 'chmod o+x {above}' (its entries stay unlistable)"
            )


def require_reachable_workspaces(workspace_template: str) -> None:
    """Tenants' uids must reach their workspaces (their commands and own servers run there)."""
    _require_reachable(template_base(workspace_template).resolve())


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def tenant_base_context(
    base: BuiltInToolContext,
    functions: Sequence[str],
    *,
    workspace_template: str | None,
    uids: range | None,
    secret_files: Sequence[Path],
) -> BuiltInToolContext:
    """The context every tenant's is made from (its workspace and uid set per user); raises
    ToolArgumentError with a one-line reason when the built-ins asked for cannot be isolated."""
    # The code tool runs a program as bash runs a command: it needs what bash needs.
    builtins = [name for name in functions if name in builtin_tools() or name == CODE_TOOL]
    if not builtins:
        return base
    if workspace_template is None:
        raise ToolArgumentError(
            f"refusing to serve built-ins ({', '.join(builtins)}) to many users from one shared workspace: "
            "add --workspace-template DIR/{user} (each user gets a folder of its own)"
        )
    secrets = [p.resolve() for p in secret_files]
    base_folder = template_base(workspace_template).resolve()
    shown = [(base_folder, "where the workspaces are made")]
    shown += [(p.resolve(), "in a read-only root") for p in base.read_only_roots]
    shown += [(p.resolve(), "in a folder commands may write") for p in base.sandbox_writable]
    for secret in secrets:
        for folder, where in shown:
            if _inside(secret, folder):
                raise ToolArgumentError(
                    f"the registry file {secret} lies {where} ({folder}), which commands see: move it out"
                )
    context = dataclasses.replace(
        base, sandbox_view="minimal", sandbox_hidden=(*base.sandbox_hidden, *secrets), user_id=None
    )
    commands = [name for name in ("bash", CODE_TOOL) if name in builtins]
    if not commands:
        return context
    if base.sandbox == "off":
        raise ToolArgumentError(
            f"refusing to serve {' and '.join(commands)} to many users without a sandbox: add --sandbox on "
            "(bubblewrap, Debian package bubblewrap, or Landlock on Linux 5.13+)"
        )
    if uids is not None:
        require_reachable_workspaces(workspace_template)
    mode = "on" if base.sandbox == "auto" else base.sandbox
    try:
        kind = resolve_kind(mode)
        if kind == "bubblewrap" and uids is not None:
            _probe_bwrap_as(uids.start)
        _require_socket_filter()
    except SandboxUnavailable as exc:
        raise ToolArgumentError(
            f"refusing to serve bash to many users: no sandbox that hides other tenants works here ({exc}); "
            "install bubblewrap (Debian package bubblewrap) or run on a kernel with Landlock (Linux 5.13+), "
            f"or leave {' and '.join(commands)} out of --functions"
        ) from None
    context = dataclasses.replace(context, sandbox=mode)
    require_network(context, kind, None if uids is None else uids.start)
    return context


def require_network(context: BuiltInToolContext, kind: str, uid: int | None) -> None:
    """Raise ToolArgumentError when the network asked for (`--network`, `--network-allow`)
    cannot be given here: served commands never share the host's network namespace, and never
    fall back to it."""
    network = context.sandbox_network
    if network == "host":
        raise ToolArgumentError(
            "--network host shares the server's network namespace with every command (its loopback services, "
            "the registry's port, private networks, cloud metadata): serve takes --network (internet only) "
            "or --network-allow DOMAIN,..."
        )
    if network == "none":
        return
    if kind != "bubblewrap":
        raise ToolArgumentError(
            f"refusing to start with --network: commands get a network only in a namespace of their own, which "
            f"needs bubblewrap and user namespaces (the sandbox here is {kind})"
        )
    try:
        netns.probe(uid)
    except netns.NetworkUnavailable as exc:
        raise ToolArgumentError(f"refusing to start with --network: {exc}") from None
