"""The output cap bounds the text the model receives, after formatting, with one cut wording."""

from __future__ import annotations

from pathlib import Path

import pytest
from _search_helpers import call, router_for, write

from toolroute import _core


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, ".gitignore", "ignored*/\n")
    for i in range(40):
        write(root, f"ignored{i}/x.txt", "hit\n")
        write(root, f".hidden{i}", "hit\n")
        write(root, f"d/{'n' * 60}{i}.txt", "hit " + "y" * 300 + "\n")
    return root


@pytest.mark.parametrize("cap", [40, 90, 200, 700])
@pytest.mark.parametrize("tool", ["grep", "glob"])
def test_text_never_exceeds_the_cap(ws: Path, cap: int, tool: str) -> None:
    args = {"pattern": "hit"} if tool == "grep" else {"pattern": "*.txt"}
    text, _ = call(router_for(ws, max_output_chars=cap, max_line_chars=1000), tool, **args)
    assert len(text) <= cap
    # Any cut says so in the one wording (never a bare "…" or "[cut]").
    assert "[cut]" not in text
    if "…" in text:
        assert _core.CUT_NOTICE in text


def test_one_row_longer_than_the_cap_is_cut_with_the_notice(ws: Path) -> None:
    text, trace = call(
        router_for(ws, max_output_chars=300, max_line_chars=5000), "grep", pattern="y+", path="d", head_limit=1
    )
    assert len(text) <= 300 and _core.CUT_NOTICE in text and trace["shown"] == 1


@pytest.mark.parametrize("tool", ["grep", "glob"])
def test_a_cancelled_call_stops_its_search(ws: Path, tool: str) -> None:
    """A call whose client went away has its cancel token fired: the Rust search is told (the
    flag the tool hands it) and stops, and the call fails as cancelled rather than answer a
    question nobody waits for. (Stopping between files and inside a long file is
    `a_cancelled_search_stops_between_files_and_inside_a_long_one` in rust/search/src/tests.rs.)"""
    from toolroute import cancellation
    from toolroute.errors import ToolExecutionError

    router = router_for(ws)
    args = {"pattern": "hit", "no_ignore": True} if tool == "grep" else {"pattern": "*.txt"}
    assert "hit" in call(router, tool, **args)[0] or tool == "glob"  # answered when not cancelled
    token = cancellation.CancelToken()
    token.cancel()
    reset = cancellation._current.set(token)
    try:
        with pytest.raises(ToolExecutionError, match="cancelled before it finished"):
            router.invoke(tool, args)
    finally:
        cancellation._current.reset(reset)
