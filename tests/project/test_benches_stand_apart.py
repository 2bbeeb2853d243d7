"""Benchmarks import nothing from tests/: what both need lives in testing/ (pytest's `pythonpath`),
so moving or renaming a test cannot break `toolroute bench` unseen (it once did: a bench imported a
test module that had moved)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules_in(folder: Path) -> set[str]:
    return {path.stem for path in folder.rglob("*.py")}


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_tests_and_testing_define_no_module_of_the_same_name() -> None:
    assert modules_in(ROOT / "tests") & modules_in(ROOT / "testing") == set()


def test_no_benchmark_imports_a_module_of_tests() -> None:
    of_tests = modules_in(ROOT / "tests") - {"conftest"}
    offenders = {
        path.name: sorted(imported_names(path) & (of_tests | {"tests"}))
        for path in sorted((ROOT / "benches").glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_no_benchmark_puts_tests_on_the_path() -> None:
    for path in sorted((ROOT / "benches").glob("*.py")):
        for line in path.read_text().splitlines():
            if "sys.path" in line or "PYTHONPATH" in line:
                assert '"tests"' not in line and "/ 'tests'" not in line, f"{path.name}: {line.strip()}"
