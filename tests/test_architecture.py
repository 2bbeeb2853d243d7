"""The import rules of docs/architecture.md, checked with import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layers_keep_their_import_rules() -> None:
    script = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    proc = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Contracts: " in proc.stdout, proc.stdout + proc.stderr  # it ran and read both contracts
    assert proc.returncode == 0, proc.stdout
