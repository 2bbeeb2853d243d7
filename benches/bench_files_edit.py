"""edit on a 10 MB file: toolroute (Rust, on bytes) vs the same edit written the obvious way in Python.

Run: python -m pytest benches/bench_files_edit.py --benchmark-only
Cases: a unique exact replacement, replace_all of a common token, and a miss that must find the
nearest near-match (tab vs space indentation). Target: at least 10x faster than pure Python.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _files_pure import edit_file, edit_text
from _files_report import ratio_report, record  # noqa: F401  (fixture)

from toolroute._core import edit_bytes
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError
from toolroute.router import ToolRouter

pytestmark = pytest.mark.usefixtures("ratio_report")
TARGET_BYTES = 10 * 1024 * 1024

CASES: dict[str, tuple[str, str, bool]] = {
    "unique": ("    item_330000 = value(330000)\n", "    item_330000 = value(0)\n", False),
    "replace_all": ("value(", "calc(", True),
    "near-miss": ("\titem_300000 = value(300000)\n\titem_300001 = value(300001)", "x", False),
}


@pytest.fixture(scope="module")
def content() -> bytes:
    rows: list[str] = []
    size = i = 0
    while size < TARGET_BYTES:
        row = f"    item_{i} = value({i})\n"
        rows.append(row)
        size += len(row)
        i += 1
    return "".join(rows).encode()


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        try:
            return fn(*args)
        except (ValueError, ToolArgumentError) as exc:
            return exc

    return run


def test_same_results(content: bytes) -> None:
    for old, new, replace_all in (CASES["unique"], CASES["replace_all"]):
        rust = edit_bytes(content, old, new, replace_all)
        pure = edit_text(content, old, new, replace_all)
        assert (bytes(rust[0]), rust[1], rust[2]) == pure
    with pytest.raises(ToolArgumentError, match="line 300001"):
        edit_bytes(content, *CASES["near-miss"])


@pytest.mark.parametrize("case", list(CASES))
def test_in_memory_toolroute(benchmark, content: bytes, case: str) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = f"edit in memory, 10 MB: {case}"
    benchmark(_quiet(edit_bytes), content, *CASES[case])
    record(benchmark, f"edit in memory {case}:toolroute")


@pytest.mark.parametrize("case", list(CASES))
def test_in_memory_pure_python(benchmark, content: bytes, case: str) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = f"edit in memory, 10 MB: {case}"
    benchmark(_quiet(edit_text), content, *CASES[case])
    record(benchmark, f"edit in memory {case}:pure-python")


def _restore(path: Path, data: bytes) -> Callable[[], None]:
    def setup() -> None:
        path.write_bytes(data)

    return setup


def test_on_disk_toolroute(benchmark, content: bytes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "big.py"
    router = ToolRouter(context=BuiltInToolContext(tmp_path))
    old, new, _ = CASES["unique"]
    benchmark.group = "edit on disk (atomic write), 10 MB: unique"
    args = ("edit", {"path": "big.py", "old_string": old, "new_string": new})
    benchmark.pedantic(router.invoke, args=args, setup=_restore(path, content), rounds=15)
    record(benchmark, "edit on disk unique:toolroute")


def test_on_disk_pure_python(benchmark, content: bytes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "big.py"
    old, new, _ = CASES["unique"]
    benchmark.group = "edit on disk (atomic write), 10 MB: unique"
    benchmark.pedantic(edit_file, args=(path, old, new, False), setup=_restore(path, content), rounds=15)
    record(benchmark, "edit on disk unique:pure-python")
