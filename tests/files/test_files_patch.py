"""apply_patch through router.invoke: every operation, errors, bytes kept, all-or-nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from _files_helpers import patch, router_for, snapshot, tree_hash, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolroute.errors import PathDeniedError, ToolArgumentError


def test_all_operations_and_trace(tmp_path: Path) -> None:
    write(tmp_path, "src/app.py", "def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    write(tmp_path, "old/name.txt", "old\n")
    write(tmp_path, "gone.txt", "bye\n")
    p = patch(
        "*** Add File: docs/new.md",
        "+# New",
        "*** Update File: src/app.py",
        "@@ def g():",
        "-    return 2",
        "+    return 3",
        "*** Update File: old/name.txt",
        "*** Move to: new/name.txt",
        "@@",
        "-old",
        "+new",
        "*** Delete File: gone.txt",
    )
    out = router_for(tmp_path).execute("apply_patch", {"patch": p})
    assert out.text.splitlines() == [
        "Success. Updated the following files:",
        "A docs/new.md",
        "M src/app.py",
        "M new/name.txt (moved from old/name.txt)",
        "D gone.txt",
    ]
    assert out.trace["added"] == ["docs/new.md"]
    assert out.trace["modified"] == ["src/app.py"]
    assert out.trace["moved"] == [{"from": "old/name.txt", "to": "new/name.txt"}]
    assert out.trace["deleted"] == ["gone.txt"]
    app = next(f for f in out.trace["files"] if f["path"] == "src/app.py")
    assert app == {"path": "src/app.py", "action": "update", "hunks": [{"line": 6, "match": "exact"}]}
    assert (tmp_path / "src/app.py").read_text().endswith("def g():\n    return 3\n")
    assert (tmp_path / "new/name.txt").read_bytes() == b"new\n"
    assert not (tmp_path / "old/name.txt").exists() and not (tmp_path / "gone.txt").exists()


def test_codex_json_alias_input(tmp_path: Path) -> None:
    router_for(tmp_path).invoke("apply_patch", {"input": patch("*** Add File: a.txt", "+a")})
    assert (tmp_path / "a.txt").read_bytes() == b"a\n"


def test_fuzzy_tiers_are_reported(tmp_path: Path) -> None:
    write(tmp_path, "q.txt", "say \u201chi\u201d \u2014 ok\n\tindented   \n")
    p = patch("*** Update File: q.txt", '@@\n-say "hi" - ok\n+say hi', "@@\n-indented\n+dedented")
    out = router_for(tmp_path).execute("apply_patch", {"patch": p})
    matches = [h["match"] for h in out.trace["files"][0]["hunks"]]
    assert matches == ["ignoring whitespace and Unicode punctuation", "ignoring surrounding whitespace"]
    assert (tmp_path / "q.txt").read_bytes() == b"say hi\ndedented\n"


def test_tabs_mixed_endings_and_bom_survive(tmp_path: Path) -> None:
    original = b"\xef\xbb\xbfint main() {\r\n\tint a = 1;\n\tint b = 2;\r\n\treturn a;\r\n}\r\n"
    f = write(tmp_path, "main.c", original)
    p = patch("*** Update File: main.c", "@@", " \tint a = 1;", "-\tint b = 2;", "+\tint b = 3;", " \treturn a;")
    router_for(tmp_path).invoke("apply_patch", {"patch": p})
    assert f.read_bytes() == original.replace(b"int b = 2;", b"int b = 3;")


def test_parse_errors_are_argument_errors(tmp_path: Path) -> None:
    r = router_for(tmp_path)
    with pytest.raises(ToolArgumentError, match="first line of the patch must be"):
        r.invoke("apply_patch", {"patch": "diff --git a/x b/x"})
    with pytest.raises(ToolArgumentError, match="line 2: '\\*\\*\\* Frobnicate File: x' is not a valid hunk header"):
        r.invoke("apply_patch", {"patch": patch("*** Frobnicate File: x")})
    with pytest.raises(ToolArgumentError, match="No files were modified"):
        r.invoke("apply_patch", {"patch": patch()})


def test_mismatch_names_file_hunk_and_context(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "one\ntwo\nthree\n")
    p = patch("*** Update File: a.txt", "@@", "-one", "+1", "@@", " two", "-four", "+4")
    with pytest.raises(ToolArgumentError) as err:
        router_for(tmp_path).invoke("apply_patch", {"patch": p})
    msg = str(err.value)
    assert "a.txt" in msg and "hunk 2" in msg and "    two\n    four" in msg and "no file was changed" in msg
    assert (tmp_path / "a.txt").read_bytes() == b"one\ntwo\nthree\n"


def test_non_utf8_update_refused_untouched(tmp_path: Path) -> None:
    f = write(tmp_path, "l.txt", "caf\xe9\n".encode("latin-1"))
    with pytest.raises(ToolArgumentError, match="not valid UTF-8"):
        router_for(tmp_path).invoke("apply_patch", {"patch": patch("*** Update File: l.txt", "-caf", "+cafe")})
    assert f.read_bytes() == b"caf\xe9\n"


FAILING_PATCHES = [
    # the last hunk's context is wrong
    patch("*** Add File: n.txt", "+n", "*** Update File: a.txt", "-a1", "+A1", "*** Update File: b.txt", "-zz", "+y"),
    # the last operation deletes a missing file
    patch("*** Delete File: b.txt", "*** Update File: a.txt", "-a1", "+A", "*** Delete File: missing.txt"),
    # an escape at the end
    patch("*** Update File: a.txt", "-a1", "+A", "*** Add File: ../../escape.txt", "+e"),
    # malformed after good sections
    patch("*** Add File: n.txt", "+n", "*** Update File: a.txt", "-a1", "+A", "@@", "garbage"),
    # update of a directory
    patch("*** Add File: n.txt", "+n", "*** Update File: sub", "-x", "+y"),
    # move onto a directory
    patch("*** Update File: a.txt", "*** Move to: sub", "-a1", "+A"),
]


@pytest.mark.parametrize("bad", FAILING_PATCHES)
def test_failed_patch_leaves_every_byte(tmp_path: Path, bad: str) -> None:
    ws = tmp_path / "ws"
    write(ws, "a.txt", "a1\na2\n")
    write(ws, "b.txt", b"b\r\n")
    write(ws, "sub/x", "x")
    before = tree_hash(tmp_path)
    with pytest.raises((ToolArgumentError, PathDeniedError)):
        router_for(ws).invoke("apply_patch", {"patch": bad})
    assert tree_hash(tmp_path) == before


# --- property: a generated patch followed by its inverse restores the original bytes ---

_text = st.text(alphabet=" \tabcXYZ(){}=;'\"\u00e9\u2014", max_size=12)


@st.composite
def file_and_edits(draw: st.DrawFn) -> tuple[list[str], str, bool, list[tuple[int, int, int, list[str]]]]:
    n = draw(st.integers(min_value=1, max_value=40))
    lines = [f"L{i}:{draw(_text)}" for i in range(n)]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    bom = draw(st.booleans())
    edits: list[tuple[int, int, int, list[str]]] = []  # (start, context before, deleted, inserted)
    pos = 0
    while pos < n and len(edits) < 6:
        start = draw(st.integers(min_value=pos, max_value=n - 1))
        before = draw(st.integers(min_value=1, max_value=min(3, n - start)))
        deleted = draw(st.integers(min_value=0, max_value=min(3, n - start - before)))
        inserted = [f"N{len(edits)}.{j}:{draw(_text)}" for j in range(draw(st.integers(0, 3)))]
        if deleted == 0 and not inserted:
            inserted = [f"N{len(edits)}.0:x"]
        edits.append((start, before, deleted, inserted))
        pos = start + before + deleted + 1
        if not draw(st.booleans()):
            break
    return lines, eol, bom, edits


def _forward_and_inverse(lines: list[str], edits: list[tuple[int, int, int, list[str]]]) -> tuple[str, str]:
    fwd, inv = ["*** Update File: f.txt"], ["*** Update File: f.txt"]
    for start, before, deleted, inserted in edits:
        ctx = lines[start : start + before]
        gone = lines[start + before : start + before + deleted]
        fwd += ["@@", *(" " + c for c in ctx), *("-" + g for g in gone), *("+" + i for i in inserted)]
        inv += ["@@", *(" " + c for c in ctx), *("-" + i for i in inserted), *("+" + g for g in gone)]
    return patch(*fwd), patch(*inv)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file_and_edits())
def test_patch_then_inverse_restores_original_bytes(case: tuple) -> None:  # type: ignore[type-arg]
    lines, eol, bom, edits = case
    original = (b"\xef\xbb\xbf" if bom else b"") + "".join(line + eol for line in lines).encode()
    forward, inverse = _forward_and_inverse(lines, edits)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        f = write(root, "f.txt", original)
        r = router_for(root)
        r.invoke("apply_patch", {"patch": forward})
        changed = f.read_bytes()
        assert changed != original
        r.invoke("apply_patch", {"patch": inverse})
        assert f.read_bytes() == original
        assert list(snapshot(root)) == ["f.txt"]


# --- parity with the reference Codex apply_patch (issue 14, items 1-4; item 5 is in
# test_files_patch_codex_unit.py) ---

PARITY_REPROS = [
    # 1: the blank line before appended lines; the old side ends in an empty line, retried without it
    (
        "def f():\n    return 1\n",
        "@@ def f():\n     return 1\n\n+def g():\n+    return 2",
        "def f():\n    return 1\n\ndef g():\n    return 2\n",
    ),
    ("a\nb\n", "@@\n-b\n-\n+c", "a\nc\n"),
    # 2: two pure additions landing at the end keep the patch's order
    ("x\n", "+A\n@@\n x\n+B", "x\nA\nB\n"),
    # 3: a whitespace-only line right after the header is a context line
    ("a\n\nb\n", "  \n-b\n+B", "a\n\nB\n"),
    # 4: an added line takes the file's first line ending; an anchor's trailing whitespace is dropped
    ("a\r\nb\nc\r\n", " a\n-b\n+B\n c", "a\r\nB\r\nc\r\n"),
    (
        "def f():  \n    x = 1\ndef f():\n    x = 1\n",
        "@@ def f():  \n-    x = 1\n+    x = 2",
        "def f():  \n    x = 1\ndef f():\n    x = 2\n",
    ),
]


@pytest.mark.parametrize(("before", "body", "after"), PARITY_REPROS)
def test_codex_parity_repros(tmp_path: Path, before: str, body: str, after: str) -> None:
    f = write(tmp_path, "m.txt", before.encode())
    router_for(tmp_path).invoke("apply_patch", {"patch": patch("*** Update File: m.txt", body)})
    assert f.read_bytes() == after.encode()


def test_whitespace_only_line_after_header_must_match(tmp_path: Path) -> None:
    f = write(tmp_path, "m.txt", "a\nb\n")
    with pytest.raises(ToolArgumentError, match="Failed to find expected lines"):
        router_for(tmp_path).invoke("apply_patch", {"patch": patch("*** Update File: m.txt", "  ", "-b", "+B")})
    assert f.read_bytes() == b"a\nb\n"
