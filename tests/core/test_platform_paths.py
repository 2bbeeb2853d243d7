"""The portable paths (what a non-Linux host runs) beside the Linux ones, on this machine.

The whole suite runs once more in CI against the `portable` build, where these paths are the ones
taken; here each is also checked directly against its Linux twin, in either build."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from toolroute.builtins._process.deathwatch import MARKER_NAME, marked_processes


@pytest.mark.parametrize("via", ["proc", "ps"])
def test_marked_processes_are_found_and_nothing_else(via: str) -> None:
    marker = f"{os.getpid()}-{uuid.uuid4().hex}"
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    marked = subprocess.Popen(sleeper, env={**os.environ, MARKER_NAME: marker})
    # Same command, no marker; and one whose command line mentions the marker but not its env.
    plain = subprocess.Popen(sleeper)
    mention = subprocess.Popen([*sleeper, f"{MARKER_NAME}={marker}x"])
    try:
        assert marked_processes(marker, via) == [marked.pid]
    finally:
        for proc in (marked, plain, mention):
            proc.kill()
            proc.wait(10)
    assert marked_processes(marker, via) == []
