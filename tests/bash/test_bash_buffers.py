"""The bounded buffers behind logs and exec output, checked against a plain bytes model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolroute.builtins._process.buffers import (
    HeadTail,
    RingBuffer,
    read_chunk,
    share_budget,
    utf8_end,
    utf8_start,
)
from toolroute.builtins._process.environment import command_environment

writes = st.lists(st.binary(max_size=300), max_size=40)


@given(capacity=st.integers(1, 200), chunks=writes, offset=st.integers(0, 13000), limit=st.integers(0, 400))
def test_ring_buffer_holds_exactly_the_newest_bytes(
    capacity: int, chunks: list[bytes], offset: int, limit: int
) -> None:
    ring = RingBuffer(capacity)
    stream = b""
    for chunk in chunks:
        ring.write(chunk)
        stream += chunk
    assert ring.total == len(stream)
    assert ring.start == max(0, len(stream) - capacity)
    start, data = ring.read(offset, limit)
    expected_start = min(max(offset, ring.start), len(stream))
    assert start == expected_start
    assert data == stream[expected_start : expected_start + limit]
    assert ring.tail(limit) == (max(ring.start, len(stream) - limit), stream[max(ring.start, len(stream) - limit) :])


@given(text=st.text(max_size=60), cut=st.integers(0, 240))
def test_utf8_cuts_fall_on_character_boundaries(text: str, cut: int) -> None:
    data = text.encode()
    cut = min(cut, len(data))
    end = utf8_end(data, cut)
    start = utf8_start(data, cut)
    data[:end].decode()  # would raise inside a character
    data[start:].decode()
    assert cut - 3 <= end <= cut <= start <= cut + 3


@given(chunks=st.lists(st.text(max_size=50), max_size=30), limit=st.integers(1, 80))
def test_polling_with_next_offset_rebuilds_the_stream(chunks: list[str], limit: int) -> None:
    ring = RingBuffer(10_000)
    for chunk in chunks:
        ring.write(chunk.encode())
    text, cursor = "", 0
    for _ in range(10_000):
        chunk = read_chunk(ring, cursor, max(limit, 4), final=True)
        text += chunk.text
        if not chunk.more:
            break
        assert chunk.next_offset > cursor  # never stalls
        cursor = chunk.next_offset
    assert text == "".join(chunks)


def test_read_chunk_reports_dropped_bytes_and_realigns_on_a_character() -> None:
    ring = RingBuffer(10)
    ring.write("aé€𝄞".encode() * 3)  # 10 bytes each
    chunk = read_chunk(ring, 0, 100, final=True)
    assert chunk.dropped == chunk.offset >= 20
    assert "\ufffd" not in chunk.text
    assert chunk.text.endswith("𝄞")


def test_read_chunk_holds_back_a_partial_character_until_the_stream_ends() -> None:
    ring = RingBuffer(100)
    ring.write("ab€".encode()[:-1])
    live = read_chunk(ring, 0, 100, final=False)
    assert live.text == "ab" and live.next_offset == 2 and live.more
    ended = read_chunk(ring, 0, 100, final=True)
    assert ended.text == "ab\ufffd"


def test_head_tail_keeps_both_ends_and_counts_what_it_cut() -> None:
    capture = HeadTail(10)
    for i in range(100):
        capture.write(f"{i:03d}".encode())
    text, omitted = capture.render(10)
    assert text.startswith("00000") and text.endswith("98099")
    assert omitted == 300 - 10
    assert "[... 290 bytes omitted of 300" in text
    assert HeadTail(10).render(10) == ("", 0)


@pytest.mark.parametrize(
    ("sizes", "budget", "expected"),
    [((3, 4), 10, (3, 4)), ((100, 2), 10, (8, 2)), ((2, 100), 10, (2, 8)), ((100, 100), 10, (5, 5))],
)
def test_share_budget(sizes: tuple[int, int], budget: int, expected: tuple[int, int]) -> None:
    assert share_budget(sizes, budget) == expected


def test_command_environment_allowlists_by_default_or_inherits_on_request() -> None:
    source = {"PATH": "/bin", "SECRET": "x", "COLORTERM": "truecolor", "PAGER": "less", "LC_ALL": "C"}
    default = command_environment(None, source)
    assert "SECRET" not in default and default["PATH"] == "/bin" and default["LC_ALL"] == "C"
    inherited = command_environment(["*"], source)
    assert inherited["SECRET"] == "x" and inherited["PAGER"] == "cat" and "COLORTERM" not in inherited
    overridden = command_environment(["PATH"], source, overrides={"TMPDIR": "/tmp/x", "PAGER": "less"})
    assert overridden["TMPDIR"] == "/tmp/x" and overridden["PAGER"] == "cat"  # never a pager
    allowed = command_environment(["PATH", "MISSING"], source)
    assert allowed == {
        "PATH": "/bin",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "GH_PAGER": "cat",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }
