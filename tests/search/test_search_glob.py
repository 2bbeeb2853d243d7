"""glob through `router.invoke(...)`: patterns, sorting, paging, the shared ignore rules, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _search_helpers import call, router_for, small_tree, write

from toolroute.errors import PathDeniedError, ToolArgumentError
from toolroute.router import ToolRouter


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = small_tree(tmp_path / "ws")
    write(root, "src/deep/x.py", "")
    write(root, "src/y.ts", "")
    write(root, "src/z.tsx", "")
    return root


def listed(router: ToolRouter, **args: object) -> list[str]:
    _, trace = call(router, "glob", **{"sort": "path", **args})
    return [f["path"] for f in trace["files"]]


def test_patterns(router: ToolRouter) -> None:
    assert listed(router, pattern="*.py") == ["a.py", "src/deep/x.py"]
    assert listed(router, pattern="**/*.py") == ["a.py", "src/deep/x.py"]
    assert listed(router, pattern="src/**/*.py") == ["src/deep/x.py"]
    assert listed(router, pattern="src/*.py") == []
    assert listed(router, pattern="*.{ts,tsx}") == ["src/y.ts", "src/z.tsx"]
    assert listed(router, pattern="*.py", path="src") == ["src/deep/x.py"]


def test_same_ignore_rules_as_grep_and_says_so(router: ToolRouter) -> None:
    text, trace = call(router, "glob", pattern="*.py")
    assert "build/out.py" not in text and ".hidden/h.py" not in text
    # build/ (one entry) and notes.log: counted as excluded by the ignore rules, which apply first.
    assert trace["skipped"]["ignored"] == 2
    assert "excluded by ignore files" in text and "no_ignore=true" in text
    _, grep_trace = call(router, "grep", pattern="needle", glob="*.py", output_mode="files_with_matches")
    assert [r["path"] for r in grep_trace["results"]] == ["a.py"]
    assert grep_trace["skipped"]["ignored"] == trace["skipped"]["ignored"]
    everything = listed(router, pattern="*.py", no_ignore=True, hidden=True)
    assert everything == [".hidden/h.py", "a.py", "build/out.py", "src/deep/x.py"]


def test_gitignore_inside_and_outside_git(ws: Path, router: ToolRouter) -> None:
    assert "notes.log" not in listed(router, pattern="*")
    (ws / ".git").mkdir()
    assert "notes.log" not in listed(router, pattern="*")
    assert "notes.log" in listed(router, pattern="*", no_ignore=True)


def test_sorted_newest_first_by_default(ws: Path, router: ToolRouter) -> None:
    for i, name in enumerate(["src/deep/x.py", "a.py"]):
        os.utime(ws / name, (1_000_000 + i, 1_000_000 + i))
    text, trace = call(router, "glob", pattern="*.py")
    assert [f["path"] for f in trace["files"]] == ["a.py", "src/deep/x.py"]
    assert trace["files"][0]["modified"] == pytest.approx(1_000_001)
    assert "(newest first)" in text.splitlines()[0]


def test_head_limit_offset_and_aliases(ws: Path, router: ToolRouter) -> None:
    for i in range(25):
        write(ws, f"many/f{i:02}.txt", "")
    text, trace = call(router, "glob", pattern="many/*.txt", sort="path", head_limit=10)
    assert trace["shown"] == 10 and trace["total"] == 25
    assert "Call glob again with offset=10" in text
    assert listed(router, pattern="many/*.txt", maxResults=5, offset=20) == [f"many/f{i}.txt" for i in range(20, 25)]
    text, _ = call(router, "glob", pattern="many/*.txt", offset=25)
    assert text.startswith("No results at offset 25")


def test_output_cap(ws: Path) -> None:
    for i in range(300):
        write(ws, f"many/a_rather_long_file_name_{i:03}.txt", "")
    text, trace = call(router_for(ws, max_output_chars=1500), "glob", pattern="*.txt", sort="path")
    assert len(text) <= 1500 and 0 < trace["shown"] < 300
    assert f"offset={trace['shown']}" in text


def test_no_match_empty_and_errors(router: ToolRouter) -> None:
    text, trace = call(router, "glob", pattern="*.nothing")
    assert trace["total"] == 0 and text.startswith("No files match '*.nothing'")
    assert "empty.txt" in listed(router, pattern="empty.txt")
    with pytest.raises(ToolArgumentError):
        call(router, "glob", pattern="a[")
    with pytest.raises(ToolArgumentError):
        call(router, "glob", pattern="*", sort="size")
    with pytest.raises(PathDeniedError):
        call(router, "glob", pattern="*", path="/")


def test_symlinks(tmp_path: Path, ws: Path, router: ToolRouter) -> None:
    write(tmp_path, "secret/s.py", "")
    os.symlink(tmp_path / "secret", ws / "outdir")
    os.symlink(ws, ws / "src" / "loop")
    os.symlink(ws / "a.py", ws / "alias.py")
    assert listed(router, pattern="*.py") == ["a.py", "src/deep/x.py"]
    text, trace = call(router, "glob", pattern="*.py", sort="path", follow_symlinks=True)
    assert [f["path"] for f in trace["files"]] == ["a.py", "alias.py", "src/deep/x.py"]
    assert trace["skipped"]["outside_roots"] == 1 and trace["skipped"]["errors"] >= 1
    assert "secret" not in text


def test_skip_notice_in_a_tree_without_ignore_files(tmp_path: Path) -> None:
    """The one-read walk (no ignore file anywhere) still reports hidden entries, and a `.gitignore`
    of `*` that hides itself too (as virtualenv and pytest write them) still counts as ignored."""
    root = tmp_path / "plain"
    write(root, "a.py", "")
    write(root, "pkg/b.py", "")
    write(root, "pkg/.secret.py", "")
    write(root, ".cache/c.py", "")
    router = router_for(root)
    text, trace = call(router, "glob", pattern="*.py", sort="path")
    assert [f["path"] for f in trace["files"]] == ["a.py", "pkg/b.py"]
    assert (trace["skipped"]["ignored"], trace["skipped"]["hidden"]) == (0, 2)
    assert "2 hidden (dot) entries skipped" in text and "excluded by ignore files" not in text
    write(root, "venv/.gitignore", "*\n")
    write(root, "venv/lib/site.py", "")
    text, trace = call(router, "glob", pattern="*.py", sort="path")
    assert [f["path"] for f in trace["files"]] == ["a.py", "pkg/b.py"]
    # venv/lib (venv/.gitignore is hidden, and not a *.py the notice would be about).
    assert (trace["skipped"]["ignored"], trace["skipped"]["hidden"]) == (1, 2)
    assert "1 entry excluded by ignore files" in text
