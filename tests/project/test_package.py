"""The package as a consumer sees it: typed for their type checker, one version everywhere."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from _serve_helpers import run_cli

import toolroute

ROOT = Path(__file__).resolve().parents[2]

CONSUMER = """
from toolroute import ToolRouter

router = ToolRouter()
text = router.invoke("read_file", {"path": "README.md"})
count: int = text  # a str: the error below proves mypy read toolroute's own annotations
"""


def test_a_consumer_type_checks_against_the_packages_annotations(tmp_path: Path) -> None:
    # Without py.typed (or with untyped signatures) mypy would report "missing library stubs" or
    # infer Any and find nothing wrong with the last line.
    (tmp_path / "consumer.py").write_text(textwrap.dedent(CONSUMER))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), "consumer.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'consumer.py:6: error: Incompatible types in assignment (expression has type "str", '
        'variable has type "int")  [assignment]'
    ], proc.stdout


def test_one_version_in_metadata_module_and_command_line() -> None:
    installed = importlib.metadata.version("toolroute")
    assert toolroute.__version__ == installed
    proc = run_cli("--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"toolroute {installed}")
    cargo = (ROOT / "Cargo.toml").read_text()  # every crate takes the workspace's version
    assert re.search(rf'^version = "{re.escape(installed)}"$', cargo, re.MULTILINE), "the workspace's version"


def test_the_build_backend_asks_for_the_rust_version_cargo_needs() -> None:
    cargo = (ROOT / "Cargo.toml").read_text()
    backend = (ROOT / "build_backend" / "toolroute_build.py").read_text()
    needed = re.search(r'^rust-version = "(\d+)\.(\d+)"$', cargo, re.MULTILINE)
    checked = re.search(r"^RUST_MIN = \((\d+), (\d+)\)", backend, re.MULTILINE)
    assert needed is not None and checked is not None
    assert needed.groups() == checked.groups()
