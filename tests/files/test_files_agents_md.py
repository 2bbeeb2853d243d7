"""update_agents_md through router.invoke: read/write/append, AI4J names, the size cap."""

from __future__ import annotations

from pathlib import Path

import pytest
from _files_helpers import router_for, tree_hash, write

from toolroute.context import ToolLimits
from toolroute.errors import PathDeniedError, ToolArgumentError


def test_read_missing_then_write_append_read(tmp_path: Path) -> None:
    r = router_for(tmp_path)
    out = r.execute("update_agents_md", {})
    assert out.text == "AGENTS.md does not exist yet." and out.trace["exists"] is False
    assert r.invoke("update_agents_md", {"action": "write", "content": "# Notes"}) == "Wrote AGENTS.md (now 7 bytes)."
    r.invoke("update_agents_md", {"action": "append", "text": "- use tabs\n"})
    r.invoke("update_agents_md", {"action": "Append", "content": "- run ruff\n"})
    assert (tmp_path / "AGENTS.md").read_bytes() == b"# Notes\n- use tabs\n- run ruff\n"
    assert r.invoke("update_agents_md", {"action": "read"}) == "# Notes\n- use tabs\n- run ruff\n"


def test_dot_agents_fallback(tmp_path: Path) -> None:
    f = write(tmp_path, ".agents/AGENTS.md", "old\n")
    r = router_for(tmp_path)
    assert r.invoke("update_agents_md", {"action": "read"}) == "old\n"
    r.invoke("update_agents_md", {"action": "append", "text": "new"})
    assert f.read_bytes() == b"old\nnew"
    assert not (tmp_path / "AGENTS.md").exists()


def test_cap_and_bad_requests_change_nothing(tmp_path: Path) -> None:
    write(tmp_path, "AGENTS.md", "x" * 90)
    r = router_for(tmp_path, limits=ToolLimits(agents_md_max_bytes=100))
    before = tree_hash(tmp_path)
    with pytest.raises(ToolArgumentError, match="over the 100-byte cap"):
        r.invoke("update_agents_md", {"action": "append", "text": "y" * 20})
    with pytest.raises(ToolArgumentError, match="over the 100-byte cap"):
        r.invoke("update_agents_md", {"action": "write", "content": "y" * 101})
    with pytest.raises(ToolArgumentError, match="needs content"):
        r.invoke("update_agents_md", {"action": "write"})
    with pytest.raises(ToolArgumentError, match="needs text"):
        r.invoke("update_agents_md", {"action": "append"})
    with pytest.raises(ToolArgumentError, match="action"):
        r.invoke("update_agents_md", {"action": "delete"})
    assert tree_hash(tmp_path) == before


def test_oversized_existing_file_is_refused_on_read(tmp_path: Path) -> None:
    write(tmp_path, "AGENTS.md", "z" * 300)
    with pytest.raises(ToolArgumentError, match="300 bytes"):
        router_for(tmp_path, limits=ToolLimits(agents_md_max_bytes=100)).invoke("update_agents_md", {})


def test_symlinked_memory_file_outside_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write(tmp_path, "elsewhere.md", "secret")
    (ws / "AGENTS.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(PathDeniedError):
        router_for(ws).invoke("update_agents_md", {"action": "write", "content": "x"})
    assert (tmp_path / "elsewhere.md").read_bytes() == b"secret"


def test_read_only_flags() -> None:
    from toolroute.builtins import builtin_tools

    tools = builtin_tools()
    flags = {n: tools[n].read_only for n in ("read_file", "write_file", "edit", "apply_patch", "update_agents_md")}
    assert flags == {
        "read_file": True,
        "write_file": False,
        "edit": False,
        "apply_patch": False,
        "update_agents_md": False,
    }
