"""sandbox_writes: Landlock confines writes to the workspace (and temp) where the kernel offers it,
and fails clearly where it does not. The tests adapt to the kernel but always assert one or the other."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bash_helpers import bash_router, call, wait_ended

from toolroute.builtins._process import pump, sandbox
from toolroute.builtins._process.sandbox import SandboxUnavailable, landlock_abi
from toolroute.errors import ToolExecutionError


def _landlock() -> int | None:
    try:
        return landlock_abi()
    except SandboxUnavailable:
        return None


ABI = _landlock()
needs_landlock = pytest.mark.skipif(ABI is None, reason="the kernel does not offer Landlock")


@pytest.fixture
def outside() -> Iterator[Path]:
    """A writable directory outside the workspace and outside temp (which the sandbox allows)."""
    temp = (Path(tempfile.gettempdir()).resolve(), Path("/tmp").resolve())
    for base in ("/dev/shm", "/var/tmp", str(Path.home())):
        real = Path(base).resolve()
        if real.is_dir() and os.access(real, os.W_OK) and not any(real.is_relative_to(t) for t in temp):
            path = Path(tempfile.mkdtemp(prefix="toolroute-sandbox-", dir=real))
            yield path
            shutil.rmtree(path, ignore_errors=True)
            return
    pytest.skip("no writable directory outside temp to test against")


@needs_landlock
def test_writes_inside_the_workspace_work_and_outside_fail(ws: Path, outside: Path) -> None:
    with bash_router(ws, sandbox_writes=True) as router:
        inside = call(router, command="echo kept > inside.txt && mkdir -p d/e && mv inside.txt d/e/ && echo ok")
        escaped = call(router, command=f"echo leaked > {outside}/leak.txt")
        removal = call(router, command=f"rm -rf {outside}")
        reading = call(router, command="head -c 5 /etc/passwd > /dev/null && echo readable")
        temp = call(router, command='f=$(mktemp) && echo t > "$f" && rm "$f" && echo temp-ok')
    assert inside["exitCode"] == 0 and inside["stdout"] == "ok\n"
    assert (ws / "d" / "e" / "inside.txt").read_text() == "kept\n"
    assert escaped["exitCode"] != 0 and "Permission denied" in escaped["stderr"]
    assert not (outside / "leak.txt").exists()
    assert removal["exitCode"] != 0 and outside.is_dir()
    assert reading["stdout"] == "readable\n"  # reading is never restricted
    assert temp["stdout"] == "temp-ok\n"


@needs_landlock
def test_background_processes_are_confined_too(ws: Path, outside: Path) -> None:
    with bash_router(ws, sandbox_writes=True) as router:
        pid = call(router, action="start", command=f"touch {outside}/bg.txt; echo rc=$? > rc.txt")["processId"]
        wait_ended(router, pid)
    assert (ws / "rc.txt").read_text() == "rc=1\n"
    assert not (outside / "bg.txt").exists()


@needs_landlock
def test_without_the_option_nothing_is_confined(ws: Path, outside: Path) -> None:
    with bash_router(ws) as router:
        out = call(router, command=f"echo free > {outside}/free.txt")
    assert out["exitCode"] == 0 and (outside / "free.txt").read_text() == "free\n"


@pytest.mark.skipif(ABI is not None, reason="the kernel offers Landlock")
def test_without_landlock_the_option_fails_clearly(ws: Path) -> None:
    with bash_router(ws, sandbox_writes=True) as router, pytest.raises(ToolExecutionError, match="Landlock"):
        call(router, command="true")


def test_an_unavailable_sandbox_is_an_error_not_a_silent_pass(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> int:
        raise SandboxUnavailable("this kernel does not offer Landlock (simulated)")

    monkeypatch.setattr(sandbox, "landlock_abi", unavailable)
    with bash_router(ws, sandbox_writes=True) as router:
        for action in ("exec", "start"):
            with pytest.raises(ToolExecutionError, match=r"sandbox_writes is set but cannot be honoured.*simulated"):
                call(router, action=action, command="touch ran")
        assert call(router, action="list") == {"processes": []}
    assert not (ws / "ran").exists()


@needs_landlock
def test_a_helper_failure_is_reported(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump, "_bash", "/nonexistent/bash")
    with bash_router(ws, sandbox_writes=True) as router:
        with pytest.raises(ToolExecutionError, match="Landlock sandbox could not start the command"):
            call(router, command="true")
        assert call(router, action="list") == {"processes": []}
