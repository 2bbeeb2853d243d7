"""One shape per concept across the binding, held by tests.

grep's and glob's options are declared once on each side: in Python by the built-ins' request
models (`GrepRequest`, `GlobRequest`), in Rust by the search crate's `GrepOptions` and
`WalkOptions`, which the binding fills attribute by attribute. The binding is asked here (a real
call through it, on a request that records what is read) rather than its source restated: every
attribute it reads is one the model declares, and every option the model declares reaches Rust
(but paging, which Python does). A native `apply_patch` operation has one class, `PatchOperation`,
whose attributes the binding reads, and V4A's rules live in the patch crate, not the binding.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolroute import _core
from toolroute.builtins.glob import GlobRequest
from toolroute.builtins.grep import GrepRequest
from toolroute.builtins.patch_operation import PatchOperation
from toolroute.errors import ToolArgumentError

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "toolroute"
BINDING = REPO / "rust" / "binding" / "src"

# Options only Python uses: the page of results shown (the search itself is the same).
PAGING = {"head_limit", "offset"}


class Recording:
    """A request that notes each attribute read of it (by the binding) and answers as `inner`."""

    def __init__(self, inner: BaseModel, leave_out: str | None = None) -> None:
        self._inner = inner
        self._leave_out = leave_out
        self.read: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.read.append(name)
        if name == self._leave_out:
            raise AttributeError(name)
        return getattr(self._inner, name)


def declared(model: type[BaseModel]) -> set[str]:
    """What a model declares: its fields and its properties."""
    properties = {name for name, value in vars(model).items() if isinstance(value, property)}
    return set(model.model_fields) | properties


def run(request: object, ws: Path) -> None:
    conf = _core.Confinement(ws)
    if isinstance(request, Recording) and isinstance(request._inner, GlobRequest):
        _core.glob(conf, request, index=False)  # type: ignore[arg-type]
    else:
        _core.grep(conf, request, max_line_bytes=100, index=False)  # type: ignore[arg-type]


def read_by_rust(model: BaseModel, ws: Path) -> list[str]:
    recording = Recording(model)
    run(recording, ws)
    return recording.read


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("needle\n")
    return tmp_path


@pytest.mark.parametrize("model", [GrepRequest(pattern="needle"), GlobRequest(pattern="*.py")])
def test_rust_reads_only_what_the_request_model_declares(model: BaseModel, ws: Path) -> None:
    read = read_by_rust(model, ws)
    assert read and len(read) == len(set(read))  # each option read once
    assert set(read) <= declared(type(model))


@pytest.mark.parametrize("model", [GrepRequest(pattern="needle"), GlobRequest(pattern="*.py")])
def test_every_option_the_model_declares_reaches_rust(model: BaseModel, ws: Path) -> None:
    """A field Rust does not read itself feeds a property it reads (`glob` -> `globs`), or is paging."""
    read = set(read_by_rust(model, ws))
    feeding = {
        field
        for name in read
        if isinstance(prop := vars(type(model)).get(name), property) and prop.fget is not None
        for field in re.findall(r"self\.(\w+)", inspect.getsource(prop.fget))
    }
    assert set(type(model).model_fields) - read - feeding - PAGING == set()


def test_a_request_without_an_option_is_refused_by_name(ws: Path) -> None:
    """The binding asks the object for each option (nothing is taken positionally or defaulted)."""
    recording = Recording(GrepRequest(pattern="needle"), leave_out="case_insensitive")
    with pytest.raises(AttributeError, match="case_insensitive"):
        run(recording, ws)


def test_the_values_rust_reads_are_the_models_after_aliases(ws: Path) -> None:
    """Shorthands resolve in Python: `-C 1` gives one line of context each side in Rust."""
    (ws / "a.py").write_text("before\nneedle\nafter\n")
    request = GrepRequest.model_validate({"pattern": "needle", "-C": 1, "include": "*.py"})
    rows = _core.grep(_core.Confinement(ws), request, max_line_bytes=100, index=False).rows()
    assert [row["text"] for row in rows] == ["before", "needle", "after"]


def classes_declaring(names: set[str]) -> list[str]:
    """Classes in the package that declare every one of `names` (as fields or properties)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            own = {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
            own |= {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
            if names <= own:
                found.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    return found


@pytest.mark.parametrize(
    ("model", "where"),
    [
        (GrepRequest(pattern="needle"), "builtins/grep.py:GrepRequest"),
        (GlobRequest(pattern="*"), "builtins/glob.py:GlobRequest"),
    ],
)
def test_one_declaration_of_the_options_on_each_side(model: BaseModel, where: str, ws: Path) -> None:
    read = set(read_by_rust(model, ws))
    # Python: the request model is the only class declaring them (no protocol restating them).
    assert classes_declaring(read) == [where]
    # Rust: no struct in the binding restates them (it fills the search crate's own structs).
    for body in re.findall(r"struct \w+ \{(.*?)\n\}", (BINDING / "search.rs").read_text(), re.S):
        fields = set(re.findall(r"^\s*(?:pub )?([a-z_]+):", body, re.M))
        assert len(fields & read) * 2 <= len(read), body


def test_one_patch_operation() -> None:
    """The native adapters, the built-in and the binding's stub share one class."""
    from toolroute.adapters import _native
    from toolroute.builtins import apply_patch

    assert _native.PatchOperation is apply_patch.PatchOperation is PatchOperation
    assert classes_declaring({"type", "path", "diff", "move_to"}) == ["builtins/patch_operation.py:PatchOperation"]
    stub = (PACKAGE / "_core.pyi").read_text()
    assert "operations: Sequence[PatchOperation]" in stub


def test_the_binding_reads_a_patch_operations_attributes(tmp_path: Path) -> None:
    recording = Recording(PatchOperation(type="create_file", path="new.txt", diff="+hello"))
    result = _core.apply_v4a(_core.Confinement(tmp_path), [recording], 1000)  # type: ignore[list-item]
    assert sorted(recording.read) == sorted(PatchOperation.model_fields)
    assert result.added == ["new.txt"] and (tmp_path / "new.txt").read_text() == "hello"


def test_v4a_rules_are_the_patch_crates_not_the_bindings(tmp_path: Path) -> None:
    """The operation kinds and what each needs are decided in `edits::patch` (the binding only
    translates); an operation the model never validated is still refused there."""
    assert not re.search(r'"(create|update|delete)_file"', (BINDING / "files.rs").read_text())
    bad = PatchOperation.model_construct(type="rename_file", path="a.txt", diff=None, move_to=None)
    with pytest.raises(ToolArgumentError, match="unknown operation type"):
        _core.apply_v4a(_core.Confinement(tmp_path), [bad], 1000)
    assert list(tmp_path.iterdir()) == []
