"""The output cap bounds the text the model receives, after formatting, with one cut wording."""

from __future__ import annotations

from pathlib import Path

import pytest
from _search_helpers import call, router_for, write


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
        assert "… [output cut at the size limit]" in text


def test_one_row_longer_than_the_cap_is_cut_with_the_notice(ws: Path) -> None:
    text, trace = call(
        router_for(ws, max_output_chars=300, max_line_chars=5000), "grep", pattern="y+", path="d", head_limit=1
    )
    assert len(text) <= 300 and "[output cut at the size limit]" in text and trace["shown"] == 1
