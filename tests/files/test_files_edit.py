"""edit through router.invoke: exact match, uniqueness, near-match hints, bytes kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _files_helpers import router_for, tree_hash, write

from toolroute.context import ToolLimits
from toolroute.errors import ToolArgumentError


def test_unique_edit_and_trace(tmp_path: Path) -> None:
    f = write(tmp_path, "a.py", "x = 1\ny = 2\n")
    out = router_for(tmp_path).execute("edit", {"path": "a.py", "old_string": "y = 2", "new_string": "y = 3"})
    assert out.text == "Edited a.py: 1 replacement at line 2."
    assert out.trace == {"path": "a.py", "replacements": 1, "lines": [2], "eol_adapted": False}
    assert f.read_bytes() == b"x = 1\ny = 3\n"


def test_not_unique_then_replace_all(tmp_path: Path) -> None:
    f = write(tmp_path, "a.txt", "foo\nbar\nfoo\n")
    r = router_for(tmp_path)
    with pytest.raises(ToolArgumentError, match=r"not unique: found 2 occurrences, starting at lines 1, 3"):
        r.invoke("edit", {"path": "a.txt", "old_string": "foo", "new_string": "baz"})
    assert f.read_bytes() == b"foo\nbar\nfoo\n"
    out = r.execute("edit", '{"path": "a.txt", "old_string": "foo", "new_string": "baz", "replaceAll": true}')
    assert out.trace["replacements"] == 2 and out.trace["lines"] == [1, 3]
    assert f.read_bytes() == b"baz\nbar\nbaz\n"


def test_miss_points_at_the_near_match(tmp_path: Path) -> None:
    write(tmp_path, "main.go", 'package main\n\nfunc main() {\n\tfmt.Println("hi")\n\treturn\n}\n')
    r = router_for(tmp_path)
    with pytest.raises(ToolArgumentError) as err:
        r.invoke("edit", {"path": "main.go", "old_string": '    fmt.Println("hi")\n    return', "new_string": "x"})
    msg = str(err.value)
    assert "not found" in msg and "line 4" in msg and "tabs" in msg
    assert '     4\t\tfmt.Println("hi")' in msg  # the excerpt shows the file's real text
    with pytest.raises(ToolArgumentError, match="then line 5 differs"):
        r.invoke("edit", {"path": "main.go", "old_string": '\tfmt.Println("hi")\n\treturn nil', "new_string": "x"})


def test_tabs_mixed_endings_and_bom_survive_byte_for_byte(tmp_path: Path) -> None:
    original = b"\xef\xbb\xbf\tfirst\r\n\tsecond\n\t\tthird\r\nlast"
    f = write(tmp_path, "m.txt", original)
    router_for(tmp_path).invoke("edit", {"path": "m.txt", "old_string": "\tsecond", "new_string": "\tSECOND"})
    assert f.read_bytes() == original.replace(b"\tsecond", b"\tSECOND")


def test_lf_old_string_matches_crlf_file(tmp_path: Path) -> None:
    f = write(tmp_path, "w.txt", b"a\r\nb\r\nc\r\n")
    out = router_for(tmp_path).execute("edit", {"path": "w.txt", "old_string": "a\nb", "new_string": "A\nB\nB2"})
    assert out.trace["eol_adapted"] is True
    assert f.read_bytes() == b"A\r\nB\r\nB2\r\nc\r\n"


def test_latin1_file_edited_exactly_or_refused(tmp_path: Path) -> None:
    original = "# café\nname = 'x'\n".encode("latin-1")
    f = write(tmp_path, "l.py", original)
    r = router_for(tmp_path)
    r.invoke("edit", {"path": "l.py", "old_string": "'x'", "new_string": "'y'"})
    assert f.read_bytes() == original.replace(b"'x'", b"'y'")
    before = f.read_bytes()
    with pytest.raises(ToolArgumentError, match="not valid UTF-8"):
        r.invoke("edit", {"path": "l.py", "old_string": "'y'", "new_string": "'é'"})
    assert f.read_bytes() == before


def test_bad_requests_change_nothing(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "alpha\nbeta\nalpha\n")
    write(tmp_path, "big.txt", "z" * 200)
    r = router_for(tmp_path, limits=ToolLimits(max_file_bytes=100))
    before = tree_hash(tmp_path)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"path": "a.txt", "old_string": "", "new_string": "x"}, "must not be empty"),
        ({"path": "a.txt", "old_string": "beta", "new_string": "beta"}, "identical"),
        ({"path": "a.txt", "old_string": "gamma", "new_string": "x"}, "not found"),
        ({"path": "a.txt", "old_string": "alpha", "new_string": "x"}, "not unique"),
        ({"path": "nope.txt", "old_string": "a", "new_string": "b"}, "no such file"),
        ({"path": "big.txt", "old_string": "z", "new_string": "y", "replace_all": True}, "limit"),
        ({"path": "a.txt", "old_string": "beta"}, "new_string"),
    ]
    for args, message in cases:
        with pytest.raises(ToolArgumentError, match=message):
            r.invoke("edit", args)
    assert tree_hash(tmp_path) == before


def test_a_large_replace_all_reports_the_first_thousand_lines(tmp_path: Path) -> None:
    """Every occurrence is replaced; the trace lists the lines of the first 1,000 (the count is
    whole), and what is written is exactly `bytes.replace`."""
    text = "".join(f"x = value({i})\n" for i in range(1500))
    write(tmp_path, "many.py", text)
    r = router_for(tmp_path)
    out = r.execute("edit", {"path": "many.py", "old_string": "value(", "new_string": "calc(", "replace_all": True})
    assert out.trace["replacements"] == 1500
    assert out.trace["lines"] == list(range(1, 1001))
    assert (tmp_path / "many.py").read_text() == text.replace("value(", "calc(")
    assert "1500 replacements" in out.text
