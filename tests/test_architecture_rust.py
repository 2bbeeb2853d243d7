"""The Rust core's import rules (docs/architecture.md, "The Rust crate"): no circle between its
files, and only the binding layer (`py/`, and `lib.rs` that registers it) speaks PyO3. The graph
is read from the sources: `crate::a::b` and `super::a` paths, resolved to the file that defines
them (comments and inline test modules left out). A copy with a planted upward reference must
fail the check, so the check is not vacuous."""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "rust" / "src"
PATH = r"((?:[a-z_0-9]+::)*[a-z_0-9]+)"


def modules(root: Path) -> dict[str, Path]:
    """Module path (`search::index::live`; `` for lib.rs) -> its file."""
    found = {}
    for file in root.rglob("*.rs"):
        parts = list(file.relative_to(root).with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        found["::".join(parts) if parts != ["lib"] else ""] = file
    return found


def graph(root: Path) -> dict[str, set[str]]:
    files = modules(root)

    def resolve(path: str) -> str | None:
        parts = path.split("::")
        while parts:
            if "::".join(parts) in files:
                return "::".join(parts)
            parts.pop()
        return None

    edges: dict[str, set[str]] = defaultdict(set)
    for module, file in files.items():
        text = re.sub(r"//[^\n]*", "", file.read_text())
        text = re.sub(r"#\[cfg\(test\)\]\s*mod tests \{.*", "", text, flags=re.S)
        parent = module.rsplit("::", 1)[0] if "::" in module else ""
        for path in re.findall(r"crate::" + PATH, text):
            edges[module].add(resolve(path) or "")
        for path in re.findall(r"super::" + PATH, text):
            edges[module].add(resolve(f"{parent}::{path}".strip(":")) or parent)
        edges[module] -= {module, ""}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in list(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_circle_between_rust_files() -> None:
    assert circles(graph(SOURCE)) == []


def test_the_check_sees_a_planted_circle(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(SOURCE, copy)
    planted = copy / "files" / "txn.rs"  # the transaction reaching up into write_file's logic
    planted.write_text("fn planted(_: crate::edits::write::WriteMode) {}\n" + planted.read_text())
    assert ["edits::write", "files::txn"] in circles(graph(copy))


def test_only_the_binding_layer_speaks_pyo3() -> None:
    speaking = sorted(
        str(file.relative_to(SOURCE))
        for module, file in modules(SOURCE).items()
        if module
        and not module.startswith("py")
        and re.search(r"\bpyo3\b|#\[py(class|methods|function)", file.read_text())
    )
    assert speaking == []


@pytest.mark.parametrize("layer", ["files", "digest"])
def test_the_bottom_layers_reach_nothing_above(layer: str) -> None:
    above = {"search", "patch", "edits", "toolsearch", "routing", "naming", "py"}
    reached = {
        target.split("::")[0]
        for module, targets in graph(SOURCE).items()
        if module.split("::")[0] == layer
        for target in targets
    }
    assert not reached & above, reached
