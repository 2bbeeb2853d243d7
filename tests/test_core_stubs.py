"""The hand-written `_core.pyi` must match the compiled extension (checked by mypy's stubtest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_stub_matches_the_extension():
    allowlist = Path(__file__).with_name("stubtest_allowlist.txt")
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "toolroute._core", "--allowlist", str(allowlist)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_is_typed():
    import toolroute

    assert (Path(toolroute.__file__).parent / "py.typed").exists()


def test_package_type_checks():
    package = Path(__file__).resolve().parents[1] / "python" / "toolroute"
    result = subprocess.run([sys.executable, "-m", "mypy", str(package)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
