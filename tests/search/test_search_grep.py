"""grep through `router.invoke(...)`: every parameter, ignore files, binary, symlinks, limits."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import anyio
import pytest
from _search_helpers import call, router_for, small_tree, write

from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext, builtin_tool_context
from toolroute.errors import PathDeniedError, ToolArgumentError
from toolroute.router import ToolRouter


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return small_tree(tmp_path / "ws")


def body(text: str) -> list[str]:
    """The result lines: without the summary line and the bracketed notices."""
    return [line for line in text.splitlines()[1:] if not line.startswith("[")]


def paths(trace: dict) -> list[str]:
    return [r["path"] for r in trace["results"] if r["kind"] != "break"]


def test_content_is_sorted_rg_style_with_structured_trace(router: ToolRouter) -> None:
    text, trace = call(router, "grep", pattern="needle")
    assert text.splitlines()[:4] == [
        "Found 5 matching lines in 4 files.",
        "a.py:2:needle = 1",
        "a.py:4:print(needle)",
        "latin1.txt:1:caf\ufffd needle",
    ]
    assert paths(trace) == ["a.py", "a.py", "latin1.txt", "src/app.js", "src/lib.rs"]
    first = trace["results"][0]
    assert first == {
        "kind": "match",
        "path": "a.py",
        "line": 2,
        "byte_offset": 10,
        "text": "needle = 1",
        "submatches": [(0, 6)],
        "truncated": False,
    }
    assert trace["total"] == 5 and trace["files_matched"] == 4


def test_invoke_within_pushed_context(ws: Path) -> None:
    with builtin_tool_context(BuiltInToolContext(ws)):
        text = ToolRouter().invoke("grep", {"pattern": "fn other"})
    assert "src/lib.rs:2:fn other() {}" in text


def test_gitignore_outside_git_is_applied_and_reported(router: ToolRouter) -> None:
    text, trace = call(router, "grep", pattern="needle")
    assert "build/out.py" not in text and "notes.log" not in text
    assert trace["skipped"]["ignored"] == 2
    assert "2 entries excluded by ignore files" in text and "no_ignore=true" in text
    text, trace = call(router, "grep", pattern="needle", no_ignore=True)
    assert "build/out.py:1:needle" in text and "notes.log:1:needle" in text
    assert "excluded by ignore files" not in text


def test_gitignore_inside_git_repository(ws: Path, router: ToolRouter) -> None:
    (ws / ".git").mkdir()
    write(ws, ".git/info/exclude", "src/app.js\n")
    text, _ = call(router, "grep", pattern="needle")
    assert "build/out.py" not in text and "src/app.js" not in text
    assert "src/lib.rs:1:" in text


def test_dot_ignore_file_and_nested_gitignore(ws: Path, router: ToolRouter) -> None:
    write(ws, "src/.ignore", "lib.rs\n")
    write(ws, "sub/.gitignore", "*.py\n!keep.py\n")
    write(ws, "sub/drop.py", "needle\n")
    write(ws, "sub/keep.py", "needle\n")
    text, _ = call(router, "grep", pattern="needle", output_mode="files_with_matches")
    assert body(text) == ["a.py", "latin1.txt", "src/app.js", "sub/keep.py"]


def test_hidden(router: ToolRouter) -> None:
    text, trace = call(router, "grep", pattern="needle")
    assert ".hidden" not in "".join(paths(trace))
    assert "hidden (dot) entries skipped: pass hidden=true" in text
    _, trace = call(router, "grep", pattern="needle", hidden=True)
    assert ".hidden/h.py" in paths(trace)


def test_binary_skipped_and_reported_text_searches_it(router: ToolRouter) -> None:
    text, trace = call(router, "grep", pattern="needle")
    assert "bin.dat" not in paths(trace)
    assert trace["skipped"]["binary"] == 1
    assert "1 binary file not searched: pass text=true" in text
    _, trace = call(router, "grep", pattern="binary", text=True)
    assert paths(trace) == ["bin.dat"]


def test_non_utf8_content_does_not_fail(router: ToolRouter) -> None:
    # Invalid UTF-8 is searchable as raw bytes, and shown with replacement characters.
    _, trace = call(router, "grep", pattern=r"(?-u:caf\xE9) needle")
    assert [(r["path"], r["text"]) for r in trace["results"]] == [("latin1.txt", "caf\ufffd needle")]


def test_empty_file(router: ToolRouter) -> None:
    text, trace = call(router, "grep", pattern="^", path="empty.txt")
    assert trace["total"] == 0 and text.startswith("No matches for '^' in empty.txt.")


def test_glob_include_alias_and_type(router: ToolRouter) -> None:
    _, trace = call(router, "grep", pattern="needle", glob="*.py")
    assert set(paths(trace)) == {"a.py"}
    _, trace = call(router, "grep", pattern="needle", include="*.{rs,js}")
    assert set(paths(trace)) == {"src/lib.rs", "src/app.js"}
    _, trace = call(router, "grep", pattern="needle", glob="!*.py, !*.txt")
    assert set(paths(trace)) == {"src/lib.rs", "src/app.js"}
    _, trace = call(router, "grep", pattern="needle", type="rust")
    assert set(paths(trace)) == {"src/lib.rs"}
    _, trace = call(router, "grep", pattern="needle", type=["py", "js"])
    assert set(paths(trace)) == {"a.py", "src/app.js"}


def test_unknown_type_suggests(router: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match="did you mean rust"):
        call(router, "grep", pattern="x", type="russt")


def test_case_fixed_word(ws: Path, router: ToolRouter) -> None:
    write(ws, "w.txt", "Foo foo fooxbar\nfoo.bar\nFOO\n")
    count = lambda **kw: call(router, "grep", path="w.txt", **kw)[1]["match_lines"]  # noqa: E731
    assert count(pattern="foo") == 2
    assert count(pattern="foo", case_insensitive=True) == 3
    assert count(pattern="foo", caseInsensitive=True) == 3
    assert count(pattern="foox", word=True) == 0
    assert count(pattern="foo.bar") == 2
    assert count(pattern="foo.bar", fixed_strings=True) == 1


def test_multiline(ws: Path, router: ToolRouter) -> None:
    write(ws, "m.txt", "start\nmiddle\nend\n")
    with pytest.raises(ToolArgumentError, match="multiline=true"):
        call(router, "grep", pattern=r"start\nmiddle", path="m.txt")
    text, _ = call(router, "grep", pattern=r"start.middle", path="m.txt", multiline=True)
    assert "m.txt:1:start\nm.txt:2:middle" in text


def test_context_before_after(ws: Path, router: ToolRouter) -> None:
    write(ws, "n.txt", "".join(f"line {i}\n" for i in range(1, 21)))
    text, _ = call(router, "grep", pattern="^line 10$", path="n.txt", context=1)
    assert body(text) == ["n.txt-9-line 9", "n.txt:10:line 10", "n.txt-11-line 11"]
    text, _ = call(router, "grep", pattern="^line 10$", path="n.txt", before=2, after=0)
    assert body(text) == ["n.txt-8-line 8", "n.txt-9-line 9", "n.txt:10:line 10"]
    text, _ = call(router, "grep", pattern="^line (2|10)$", path="n.txt", **{"-A": 1, "-B": 0})
    assert body(text) == ["n.txt:2:line 2", "n.txt-3-line 3", "--", "n.txt:10:line 10", "n.txt-11-line 11"]


def test_output_modes_and_max_count(ws: Path, router: ToolRouter) -> None:
    text, trace = call(router, "grep", pattern="needle", output_mode="count")
    assert body(text) == ["a.py:2", "latin1.txt:1", "src/app.js:1", "src/lib.rs:1"]
    assert trace["results"][0] == {"kind": "count", "path": "a.py", "count": 2}
    text, _ = call(router, "grep", pattern="needle", output_mode="files_with_matches")
    assert text.splitlines()[0] == "Found 4 files with matches."
    assert body(text) == ["a.py", "latin1.txt", "src/app.js", "src/lib.rs"]
    text, _ = call(router, "grep", pattern="needle", path="a.py", max_count=1)
    assert body(text) == ["a.py:2:needle = 1"]
    with pytest.raises(ToolArgumentError):
        call(router, "grep", pattern="needle", output_mode="lines")


def test_head_limit_offset_and_max_results_alias(ws: Path, router: ToolRouter) -> None:
    for i in range(30):
        write(ws, f"many/f{i:02}.txt", "hit\n")
    text, trace = call(router, "grep", pattern="hit", head_limit=10)
    assert trace["shown"] == 10 and paths(trace)[0] == "many/f00.txt"
    assert "[Showing results 1-10 of 30; 20 more not shown. Call grep again with offset=10" in text
    _, trace = call(router, "grep", pattern="hit", head_limit=10, offset=25)
    assert paths(trace) == [f"many/f{i}.txt" for i in range(25, 30)]
    _, trace = call(router, "grep", pattern="hit", maxResults=3)
    assert trace["shown"] == 3
    text, _ = call(router, "grep", pattern="hit", offset=30)
    assert text.startswith("No results at offset 30")


def test_output_cap_pages_cover_everything(ws: Path) -> None:
    for i in range(200):
        write(ws, f"many/file_{i:03}.txt", f"hit number {i} " + "x" * 50 + "\n")
    router = router_for(ws, max_output_chars=2000)
    seen: list[str] = []
    offset = 0
    while True:
        text, trace = call(router, "grep", pattern="hit", offset=offset)
        assert len(text) <= 2000
        seen += paths(trace)
        if "more not shown" not in text:
            break
        assert f"offset={offset + trace['shown']}" in text
        offset += trace["shown"]
    assert seen == [f"many/file_{i:03}.txt" for i in range(200)]


def test_long_lines_are_cut(ws: Path) -> None:
    write(ws, "long.txt", "x" * 5000 + "needle\n")
    text, trace = call(router_for(ws, max_line_chars=100), "grep", pattern="needle", path="long.txt")
    assert "[line cut at 100 chars]" in text and len(text) < 400
    assert trace["results"][0]["submatches"] == [(5000, 5006)]


def test_invalid_regex_names_the_position(router: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match=r"unclosed group at position 4"):
        call(router, "grep", pattern="foo(bar")
    with pytest.raises(ToolArgumentError, match="pattern"):
        call(router, "grep", pattern="")


def test_paths_are_confined(ws: Path, router: ToolRouter) -> None:
    with pytest.raises(PathDeniedError):
        call(router, "grep", pattern="root", path="/etc")
    with pytest.raises(PathDeniedError):
        call(router, "grep", pattern="x", path="../")
    with pytest.raises(ToolArgumentError, match="does not exist"):
        call(router, "grep", pattern="x", path="missing")


def test_symlinks_outside_roots_and_loops(tmp_path: Path, ws: Path, router: ToolRouter) -> None:
    write(tmp_path, "secret/s.txt", "needle secret\n")
    os.symlink(tmp_path / "secret", ws / "outdir")
    os.symlink(tmp_path / "secret/s.txt", ws / "outfile.txt")
    os.symlink(ws, ws / "src" / "loop")
    os.symlink(ws / "a.py", ws / "alias.py")
    text, _ = call(router, "grep", pattern="needle")
    assert "secret" not in text and "alias.py" not in text
    text, trace = call(router, "grep", pattern="needle", follow_symlinks=True)
    assert "secret" not in text and "alias.py:2:needle = 1" in text
    assert trace["skipped"]["outside_roots"] == 2
    assert "2 symlink(s) pointing outside the allowed roots not followed" in text
    assert trace["skipped"]["errors"] >= 1  # the loop
    with pytest.raises(PathDeniedError):
        call(router, "grep", pattern="needle", path="outdir")


def test_read_only_root_results_are_absolute(tmp_path: Path, ws: Path) -> None:
    ro = write(tmp_path, "ro/lib/r.py", "needle ro\n").parent.parent
    router = ToolRouter(context=BuiltInToolContext(ws, read_only_roots=[ro]))
    text, _ = call(router, "grep", pattern="needle ro", path=str(ro))
    assert f"{ro.resolve()}/lib/r.py:1:needle ro" in text


def test_sparse_gigabyte_file_does_not_blow_memory(ws: Path, router: ToolRouter) -> None:
    with open(ws / "huge.bin", "wb") as f:
        f.truncate(1 << 30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _, trace = call(router, "grep", pattern="needle")
    assert trace["skipped"]["binary"] == 2
    # As text the all-zero "line" would be 1 GB; the searcher's heap limit stops it with an error.
    _, trace = call(router, "grep", pattern="needle", path="huge.bin", text=True)
    assert trace["total"] == 0 and trace["skipped"]["errors"] == 1
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200 * 1024


def test_structured_api_for_python_callers(ws: Path) -> None:
    ctx = BuiltInToolContext(ws)
    result = _core.grep(ctx.confinement, GrepRequest(pattern="needle", glob=["*.py"]), max_line_bytes=8192)
    assert result.paths() == ["a.py"]
    assert [r["line"] for r in result.rows()] == [2, 4]
    assert result.rows(1, 1)[0]["text"] == "print(needle)"


def test_schema_and_traits(router: ToolRouter) -> None:
    assert router.traits("grep").read_only
    from toolroute.builtins.grep import GrepRequest

    props = GrepRequest.model_json_schema()["properties"]
    for name in ("pattern", "path", "glob", "type", "output_mode", "head_limit", "offset", "multiline"):
        assert name in props


def test_async_execute(router: ToolRouter) -> None:
    out = anyio.run(router.aexecute, "grep", {"pattern": "fn other"})
    assert "src/lib.rs:2:" in out.text


def test_git_global_excludes(tmp_path: Path, ws: Path, router: ToolRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    """git's global excludes file ($XDG_CONFIG_HOME/git/ignore) applies, like in ripgrep."""
    home = tmp_path / "home"
    write(home, ".config/git/ignore", "*.js\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    text, _ = call(router, "grep", pattern="needle")
    assert "src/app.js" not in text and "src/lib.rs:1:" in text
    text, _ = call(router, "grep", pattern="needle", no_ignore=True)
    assert "src/app.js:1:" in text
