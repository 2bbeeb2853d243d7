"""The import rules of docs/architecture.md, checked with import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_layers_keep_their_import_rules() -> None:
    script = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    proc = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Contracts: " in proc.stdout, proc.stdout + proc.stderr  # it ran and read the contract
    assert proc.returncode == 0, proc.stdout


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The stages contract is not vacuous: a copy of the package where a built-in tool imports
    the router, or the MCP gateway imports a built-in, breaks it."""
    for module, line in (
        ("builtins/edit.py", "import toolroute.router\n"),
        ("mcp/config.py", "import toolroute.builtins.bash\n"),
        ("types.py", "import toolroute.agent\n"),
    ):
        copy = tmp_path / module.replace("/", "_")
        shutil.copytree(ROOT / "python" / "toolroute", copy / "toolroute", ignore=shutil.ignore_patterns("*.so"))
        target = copy / "toolroute" / module
        target.write_text(target.read_text() + line)
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from importlinter.cli import lint_imports_command; lint_imports_command()",
                str(ROOT / "pyproject.toml"),
                "--no-cache",
            ],
            cwd=copy,
            env={**os.environ, "PYTHONPATH": str(copy)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode != 0 and "BROKEN" in proc.stdout, (module, proc.stdout[-2000:], proc.stderr[-2000:])
