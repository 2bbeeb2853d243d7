"""read_file through router.invoke, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _files_helpers import router_for, write

from toolroute._core import FilePage, read_page
from toolroute.context import BuiltInToolContext, ToolLimits
from toolroute.errors import PathDeniedError, ToolArgumentError, ToolExecutionError


def test_numbered_lines_and_trace(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "one\n\ttwo\r\nthree")
    out = router_for(tmp_path).execute("read_file", {"path": "a.txt"})
    assert out.text == "     1\tone\n     2\t\ttwo\n     3\tthree"
    assert out.trace == {
        "path": "a.txt",
        "start_line": 1,
        "end_line": 3,
        "lines_returned": 3,
        "total_lines": 3,
        "truncated": False,
        "encoding": "UTF-8",
    }


def test_offset_limit_and_ai4j_aliases(tmp_path: Path) -> None:
    write(tmp_path, "n.txt", "".join(f"line{i}\n" for i in range(1, 11)))
    r = router_for(tmp_path)
    out = r.execute("read_file", {"path": "n.txt", "offset": 4, "limit": 2})
    assert out.text.splitlines()[:2] == ["     4\tline4", "     5\tline5"]
    assert "offset=6" in out.text and out.trace["truncated"] is True
    same = r.execute("read_file", '{"path": "n.txt", "startLine": 4, "endLine": 5}')
    assert same.text == out.text
    # The marker counts against max_chars: rows give way to it (each row here is 13 characters).
    capped = r.execute("read_file", {"path": "n.txt", "maxChars": 130})
    assert capped.trace["lines_returned"] == 2 and len(capped.text) <= 130
    assert "To read on, call read_file with offset=3" in capped.text
    tiny = r.execute("read_file", {"path": "n.txt", "maxChars": 30})
    assert len(tiny.text) <= 30 and tiny.trace["lines_returned"] == 1


def test_long_lines_and_output_cap_are_marked(tmp_path: Path) -> None:
    write(tmp_path, "wide.txt", "x" * 50 + "\n" + "short\n" * 100)
    limits = ToolLimits(max_line_chars=10, max_output_chars=200)
    out = router_for(tmp_path, limits=limits).execute("read_file", {"path": "wide.txt"})
    first = out.text.splitlines()[0]
    assert first == "     1\t" + "x" * 10 + "… [line cut: 40 more characters]"
    assert len(out.text) < 400
    assert f"offset={out.trace['end_line'] + 1}" in out.text and "output cap" in out.text


def test_line_limit_caps_the_request(tmp_path: Path) -> None:
    write(tmp_path, "many.txt", "l\n" * 50)
    out = router_for(tmp_path, limits=ToolLimits(max_read_lines=5)).execute(
        "read_file", {"path": "many.txt", "limit": 40}
    )
    assert out.trace["lines_returned"] == 5 and "offset=6" in out.text and "line limit" in out.text


@pytest.mark.parametrize(
    ("data", "kind"),
    [(b"abc\x00def", "NUL"), (b"\x1f\x8b\x08\x00....", "gzip"), (b"\x7fELF\x02\x01", "ELF")],
)
def test_binary_files_refused(tmp_path: Path, data: bytes, kind: str) -> None:
    write(tmp_path, "blob", data)
    with pytest.raises(ToolArgumentError, match=f"binary file .*{kind}"):
        router_for(tmp_path).invoke("read_file", {"path": "blob"})


def test_encodings_reported_honestly(tmp_path: Path) -> None:
    r = router_for(tmp_path)
    write(tmp_path, "u16.txt", "\ufeffhé\nwörld\n".encode("utf-16-le"))
    out = r.execute("read_file", {"path": "u16.txt"})
    assert out.text == "     1\thé\n     2\twörld" and out.trace["encoding"] == "UTF-16LE (BOM)"
    write(tmp_path, "bom.txt", b"\xef\xbb\xbfhi\n")
    out = r.execute("read_file", {"path": "bom.txt"})
    assert out.text == "     1\thi" and out.trace["encoding"] == "UTF-8 with BOM"
    write(tmp_path, "latin1.txt", "café\n".encode("latin-1"))
    out = r.execute("read_file", {"path": "latin1.txt"})
    assert "café" in out.text and "not valid UTF-8" in out.text and "Latin-1" in out.text
    assert "\ufffd" not in out.text


def test_directory_gives_listing(tmp_path: Path) -> None:
    write(tmp_path, "d/b.txt", "b")
    write(tmp_path, "d/sub/c.txt", "c")
    out = router_for(tmp_path).execute("read_file", {"path": "d"})
    assert out.text.splitlines()[1:] == ["b.txt", "sub/"]
    assert "is a directory" in out.text and out.trace["directory"] is True


def test_errors(tmp_path: Path) -> None:
    r = router_for(tmp_path)
    write(tmp_path, "e.txt", "")
    write(tmp_path, "one.txt", "1\n")
    assert r.invoke("read_file", {"path": "e.txt"}) == "e.txt is empty (0 lines)."
    with pytest.raises(ToolArgumentError, match="no such file"):
        r.invoke("read_file", {"path": "missing.txt"})
    with pytest.raises(ToolArgumentError, match=r"past the end of one\.txt, which has 1 lines"):
        r.invoke("read_file", {"path": "one.txt", "offset": 5})
    with pytest.raises(ToolArgumentError, match="offset"):
        r.invoke("read_file", {"path": "one.txt", "offset": 0})
    with pytest.raises(ToolArgumentError):
        r.invoke("read_file", {"path": "one.txt", "bogus": 1})
    with pytest.raises(PathDeniedError):
        r.invoke("read_file", {"path": "../outside.txt"})


def test_file_over_max_bytes_shows_the_head(tmp_path: Path) -> None:
    write(tmp_path, "big.txt", "".join(f"row {i}\n" for i in range(1000)))
    out = router_for(tmp_path, limits=ToolLimits(max_file_bytes=100)).execute("read_file", {"path": "big.txt"})
    assert out.text.startswith("     1\trow 0") and "only the first 100 bytes were read" in out.text
    assert out.trace["truncated"] is True


def test_read_only_root_is_readable(tmp_path: Path) -> None:
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    ws.mkdir()
    write(ro, "doc.md", "docs\n")
    out = router_for(ws, read_only=(ro,)).invoke("read_file", {"path": str(ro / "doc.md")})
    assert out == "     1\tdocs"


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolExecutionError, match="not a regular file"):
        router_for(tmp_path).invoke("read_file", {"path": "pipe"})


def test_first_page_of_a_large_file_reads_only_what_it_needs(tmp_path: Path) -> None:
    write(tmp_path, "big.txt", "".join(f"row {i}\n" for i in range(300_000)))  # about 3 MB
    got = read_page(BuiltInToolContext(tmp_path).confinement, "big.txt", 1, 20, 20 << 20)
    assert isinstance(got, FilePage)
    assert got.lines == 20 and got.total is None and got.scanned < got.size // 10
    out = router_for(tmp_path).execute("read_file", {"path": "big.txt", "limit": 20})
    assert out.text.splitlines()[19] == "    20\trow 19"
    assert out.trace["total_lines"] is None and "offset=21" in out.text
    deep = router_for(tmp_path).execute("read_file", {"path": "big.txt", "offset": 299_999})
    assert deep.text == "299999\trow 299998\n300000\trow 299999" and deep.trace["total_lines"] == 300_000
