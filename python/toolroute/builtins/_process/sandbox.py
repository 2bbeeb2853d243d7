"""The parent's side of the Landlock write sandbox: probe the kernel, build the wrapped argv."""

from __future__ import annotations

import functools
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from toolroute.builtins._process import landlock_exec

HELPER = Path(landlock_exec.__file__).resolve()
# Beside the workspace, a sandboxed command may write to temp and discard output.
EXTRA_WRITABLE: tuple[str, ...] = ("/tmp", "/dev/null")


class SandboxUnavailable(RuntimeError):
    """Landlock cannot be used here; the message says why."""


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, probed once; raises SandboxUnavailable."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"Landlock is Linux-only; this is {sys.platform}")
    try:
        return landlock_exec.abi_version()
    except OSError as exc:
        raise SandboxUnavailable(f"this kernel does not offer Landlock ({exc})") from None


def writable_paths(workspace: Path) -> list[str]:
    paths = [str(workspace), tempfile.gettempdir(), *EXTRA_WRITABLE]
    return list(dict.fromkeys(paths))


def sandboxed_argv(argv: Sequence[str], workspace: Path, status_fd: int) -> list[str]:
    """`argv` run through the Landlock helper; raises SandboxUnavailable first if it cannot work."""
    landlock_abi()
    if not sys.executable:
        raise SandboxUnavailable("no Python interpreter path (sys.executable) to run the Landlock helper")
    return [sys.executable, "-I", "-S", str(HELPER), str(status_fd), *writable_paths(workspace), "--", *argv]
