"""A subset of ripgrep's own integration tests, ported as data (tests/fixtures/ripgrep/, MIT or
Unlicense, see its README): each case builds its tree, calls grep or glob through the router and
expects the lines (or files) ripgrep prints."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _search_helpers import call, router_for

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "ripgrep" / "cases.json").read_text(encoding="utf-8")
)


def build(root: Path, tree: dict[str, str | None]) -> None:
    """`name/` with None is a folder, `name -> target` a symlink, anything else a file."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in tree.items():
        if " -> " in name:
            link, target = name.split(" -> ")
            (root / link).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, root / link)
        elif name.endswith("/"):
            (root / name).mkdir(parents=True, exist_ok=True)
        else:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes((content or "").encode())


def shown(tool: str, trace: dict[str, Any]) -> list[str]:
    if tool == "glob":
        return [f["path"] for f in trace["files"]]
    rows = [r for r in trace["results"] if r["kind"] in ("match", "file")]
    return [f"{r['path']}:{r['text']}" if r["kind"] == "match" else r["path"] for r in rows]


@pytest.mark.parametrize("case", CASES, ids=[c["from"].split(" (")[0] for c in CASES])
def test_ported_case(tmp_path: Path, case: dict[str, Any]) -> None:
    ws = tmp_path / "ws"
    build(ws, case["tree"])
    _, trace = call(router_for(ws), case["tool"], **case["args"])
    assert sorted(shown(case["tool"], trace)) == sorted(case["expect"]), case["from"]
    if "lines" in case:
        assert [r["line"] for r in trace["results"] if r["kind"] == "match"] == case["lines"]


def test_glob_relativity_is_as_documented(tmp_path: Path) -> None:
    """grep's `glob` is relative to the workspace root (rg -g run there); glob's pattern to `path`."""
    ws = tmp_path / "ws"
    build(ws, {"src/a.rs": "needle", "src/sub/b.rs": "needle", "other/src/c.rs": "needle"})
    router = router_for(ws)
    _, trace = call(router, "grep", pattern="needle", path="src", glob="src/*.rs")
    assert shown("grep", trace) == ["src/a.rs:needle"]
    _, trace = call(router, "grep", pattern="needle", path="src", glob="*.rs")
    assert sorted(shown("grep", trace)) == ["src/a.rs:needle", "src/sub/b.rs:needle"]
    _, trace = call(router, "glob", pattern="sub/*.rs", path="src")
    assert shown("glob", trace) == ["src/sub/b.rs"]
    _, trace = call(router, "glob", pattern="src/*.rs")
    assert shown("glob", trace) == ["src/a.rs"]
