"""Fixtures shared by the bash stage's tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def outside() -> Iterator[Path]:
    """A writable directory outside the workspace and outside temp."""
    temp = (Path(tempfile.gettempdir()).resolve(), Path("/tmp").resolve())
    for base in ("/var/tmp", str(Path.home()), "/dev/shm"):  # bubblewrap's /dev hides /dev/shm: last
        real = Path(base).resolve()
        if real.is_dir() and os.access(real, os.W_OK) and not any(real.is_relative_to(t) for t in temp):
            path = Path(tempfile.mkdtemp(prefix="toolroute-sandbox-", dir=real))
            (path / "victim.txt").write_text("original\n")
            yield path
            shutil.rmtree(path, ignore_errors=True)
            return
    pytest.skip("no writable directory outside temp to test against")
