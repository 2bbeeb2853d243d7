"""The import rules of docs/architecture.md, checked with import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

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


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import circles among the graph's modules (strongly connected parts of more than one
    module), found iteratively (Tarjan's algorithm, without recursion)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            for j in range(i, len(edges[node])):
                child = edges[node][j]
                if child not in index:
                    work += [(node, j + 1), (child, 0)]
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    return found


def test_no_import_circle_among_the_python_modules() -> None:
    """No module imports, even for type checking only, one that imports it back (directly or
    through others): each layer's order of docs/architecture.md holds within a layer too."""
    assert _circles(grimp.build_graph("toolroute")) == []


def test_the_circle_finder_finds_one() -> None:
    """Not vacuous: the old circle (checkpoints imported the context that holds them, for its
    type) and one added between the request and the naming rules it checks with are found."""
    graph = grimp.build_graph("toolroute")
    graph.add_import(importer="toolroute.checkpoints", imported="toolroute.context")
    graph.add_import(importer="toolroute.naming", imported="toolroute.request")
    assert sorted(_circles(graph)) == [
        ["toolroute.checkpoints", "toolroute.context"],
        ["toolroute.naming", "toolroute.request"],
    ]
