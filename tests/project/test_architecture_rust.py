"""The Rust code's import rules (docs/architecture.md, "The Rust crates"): one crate per layer, each
depending only on the layers below it, which Cargo keeps (it refuses a cycle, and a crate cannot
name one it does not depend on: both are shown failing here on a copy with a planted upward
dependency); only the binding crate links PyO3; and inside each crate, no circle between files.
The file graph is read from the sources: `crate::a::b` and `super::a` paths, resolved to the file
that defines them (comments and inline test modules left out)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATH = r"((?:[a-z_0-9]+::)*[a-z_0-9]+)"

# The layers, bottom up: a crate may depend on crates of lower layers only.
LAYERS = [
    {"toolroute-digest", "toolroute-textsafety", "toolroute-toolsearch"},
    {"toolroute-names", "toolroute-files"},
    {"toolroute-edits", "toolroute-search", "toolroute-checkpoints"},
    {"toolroute-binding"},
]
LAYER_OF = {crate: n for n, layer in enumerate(LAYERS) for crate in layer}


@functools.cache  # read once: every test asks
def crates() -> dict[str, dict]:
    proc = subprocess.run(
        ["cargo", "metadata", "--offline", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return {package["name"]: package for package in json.loads(proc.stdout)["packages"]}


def crate_sources() -> dict[str, Path]:
    return {name: Path(package["manifest_path"]).parent / "src" for name, package in crates().items()}


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


def test_the_crates_are_the_layers_and_each_depends_only_downward() -> None:
    found = crates()
    assert set(found) == set(LAYER_OF)
    for name, package in found.items():
        own = {dep["name"] for dep in package["dependencies"] if dep["name"] in LAYER_OF}
        assert all(LAYER_OF[dep] < LAYER_OF[name] for dep in own), (name, own)


def test_only_the_binding_crate_links_or_speaks_pyo3() -> None:
    linking = sorted(
        name for name, package in crates().items() if any(dep["name"] == "pyo3" for dep in package["dependencies"])
    )
    assert linking == ["toolroute-binding"]
    speaking = sorted(
        str(file.relative_to(ROOT))
        for name, source in crate_sources().items()
        if name != "toolroute-binding"
        for file in source.rglob("*.rs")
        if re.search(r"\bpyo3\b|#\[py(class|methods|function)", file.read_text())
    )
    assert speaking == []


@pytest.mark.parametrize("crate", sorted(LAYER_OF))
def test_no_circle_between_the_files_of_a_crate(crate: str) -> None:
    assert circles(graph(crate_sources()[crate])) == []


def test_the_file_check_sees_a_planted_circle(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(crate_sources()["toolroute-files"], copy)
    planted = copy / "error.rs"  # the error type reaching up into the transaction that uses it
    planted.write_text("fn planted(_: crate::txn::Journal) {}\n" + planted.read_text())
    assert any({"error", "txn"} <= set(circle) for circle in circles(graph(copy)))


def workspace_copy(tmp_path: Path) -> Path:
    """The workspace's manifests and sources (no build output), to plant a change in."""
    copy = tmp_path / "ws"
    shutil.copytree(ROOT / "rust", copy / "rust", ignore=shutil.ignore_patterns("target"))
    for name in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(ROOT / name, copy / name)
    return copy


def test_cargo_refuses_a_crate_that_depends_upward(tmp_path: Path) -> None:
    copy = workspace_copy(tmp_path)
    manifest = copy / "rust" / "files" / "Cargo.toml"
    manifest.write_text(
        manifest.read_text().replace("[dependencies]\n", "[dependencies]\ntoolroute-search.workspace = true\n")
    )
    proc = subprocess.run(
        ["cargo", "metadata", "--offline", "--format-version", "1"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "cyclic package dependency" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_crate_naming_one_above_it_does_not_compile(tmp_path: Path) -> None:
    copy = workspace_copy(tmp_path)
    planted = copy / "rust" / "files" / "src" / "txn.rs"
    planted.write_text("fn planted(_: toolroute_search::Cancel) {}\n" + planted.read_text())
    env = {**os.environ, "CARGO_TARGET_DIR": str(tmp_path / "target")}
    proc = subprocess.run(
        ["cargo", "check", "--offline", "--locked", "-p", "toolroute-files"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert proc.returncode != 0
    assert "toolroute_search" in proc.stderr and "E0433" in proc.stderr, proc.stderr[-3000:]
