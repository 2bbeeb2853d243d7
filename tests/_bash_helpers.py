"""Shared helpers of the bash tests: calling the tool, and looking at real processes in /proc."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolroute.context import BuiltInToolContext, ToolLimits
from toolroute.router import ToolRouter

# Waiting for a condition, never asserting on elapsed time: generous, returns as soon as it holds.
# Commands that must write a pid file before their timeout get 2 s, ample even on a loaded machine.
WAIT = 20.0


def unavailable(probe: Callable[[], object]) -> str | None:
    """Why a sandbox probe (`bwrap_path`, `landlock_abi`) fails here, or None when it works."""
    from toolroute.builtins._process.sandbox import SandboxUnavailable

    try:
        probe()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def call(router: ToolRouter, **args: Any) -> dict[str, Any]:
    """Invoke bash and parse its JSON text; the trace must carry the same data."""
    return json.loads(call_text(router, **args))


def call_text(router: ToolRouter, **args: Any) -> str:
    """Invoke bash; the text the model would receive (the trace must carry the same data)."""
    out = router.execute("bash", args)
    assert out.trace == json.loads(out.text)
    return out.text


@contextmanager
def bash_router(workspace: Path, **context: Any) -> Iterator[ToolRouter]:
    limits = context.pop("limits", None) or ToolLimits()
    router = ToolRouter(context=BuiltInToolContext(workspace, limits=limits, **context))
    try:
        yield router
    finally:
        router.close()


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int
    state: str


def proc_info(pid: int) -> Proc | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode())


def all_processes() -> list[Proc]:
    procs = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = proc_info(int(entry))
            if info is not None:
                procs.append(info)
    return procs


def live_in_groups(groups: set[int]) -> list[Proc]:
    """Non-zombie processes in any of these process groups (every command leads its own)."""
    return [p for p in all_processes() if p.pgrp in groups and p.state not in ("Z", "X")]


def our_zombies() -> list[Proc]:
    """Zombies whose parent is this test process: children nobody reaped."""
    me = os.getpid()
    return [p for p in all_processes() if p.ppid == me and p.state == "Z"]


def is_alive(pid: int) -> bool:
    info = proc_info(pid)
    return info is not None and info.state not in ("Z", "X")


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.02)


def killed_or_dying(pid: int) -> bool:
    """Whether `pid` is gone, a zombie, or has a SIGKILL pending (to it or its thread group): what
    a signal sent before this call shows at once, with no wait for it to land."""
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except OSError:
        return True
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return status["State"].strip().startswith(("Z", "X")) or bool(pending & (1 << (signal.SIGKILL - 1)))


def wait_for_file(path: Path) -> str:
    wait_until(lambda: path.exists() and path.read_text().strip() != "", f"{path} to be written")
    return path.read_text().strip()


def wait_ended(router: ToolRouter, process_id: str) -> dict[str, Any]:
    def ended() -> bool:
        return call(router, action="status", process_id=process_id)["status"] != "RUNNING"

    wait_until(ended, f"{process_id} to end")
    return call(router, action="status", process_id=process_id)


def peak_rss_reset() -> int:
    """Reset the peak RSS counter (VmHWM) and return the baseline to measure growth from, in KiB.

    Where the reset is not allowed, the old peak is the baseline (a weaker but never false check)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return _status_kib("VmHWM")
    return _status_kib("VmRSS")


def peak_rss() -> int:
    return _status_kib("VmHWM")


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def sandbox_kinds() -> list[Any]:
    """The two sandboxes as test parameters, each skipped (with the reason) where it cannot run."""
    import pytest

    from toolroute.builtins._process.sandbox import bwrap_path, landlock_abi

    return [
        pytest.param(kind, marks=pytest.mark.skipif(why is not None, reason=f"no {kind} here: {why}"))
        for kind, why in (("bubblewrap", unavailable(bwrap_path)), ("landlock", unavailable(landlock_abi)))
    ]
