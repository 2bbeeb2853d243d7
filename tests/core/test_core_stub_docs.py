"""`_core.pyi` documents every public definition of the compiled core (stubtest checks its types
against the built module; this checks it says what each one is)."""

from __future__ import annotations

import ast
from pathlib import Path

STUB = Path(__file__).resolve().parents[2] / "python" / "toolroute" / "_core.pyi"


def undocumented(body: list[ast.stmt], where: str) -> list[str]:
    missing = []
    for i, node in enumerate(body):
        following = body[i + 1] if i + 1 < len(body) else None
        has_doc = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
        if isinstance(node, ast.ClassDef):
            if ast.get_docstring(node) is None:
                missing.append(f"{where}{node.name}")
            missing += undocumented(node.body, f"{where}{node.name}.")
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            if ast.get_docstring(node) is None:
                missing.append(f"{where}{node.name}")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not has_doc:
            missing.append(f"{where}{node.target.id}")
    return missing


def test_every_public_definition_of_the_stub_is_documented() -> None:
    tree = ast.parse(STUB.read_text())
    assert ast.get_docstring(tree)
    assert undocumented(tree.body, "") == []


def test_the_check_sees_a_missing_docstring() -> None:
    tree = ast.parse("class A:\n    '''A.'''\n    def f(self) -> int: ...\nX: int\ndef g() -> None:\n    '''G.'''\n")
    assert undocumented(tree.body, "") == ["A.f", "X"]
