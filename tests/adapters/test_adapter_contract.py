"""The one adapter contract (`ExposedTools`, `CallOutcome`, `ToolMeta`): each outcome's kind,
structure and trace, each tool's side effects, and approval held at the door."""

from __future__ import annotations

import pytest
from _framework_script import FUNCTIONS, MCP_SERVERS, World, world

from toolroute.allowlist import ExposedTools, OutcomeKind

__all__ = ["world"]


def test_every_kind_of_outcome(world: World) -> None:
    tools = ExposedTools(world.router, FUNCTIONS, MCP_SERVERS)
    cases = {
        OutcomeKind.OK: ("read_file", {"path": "notes.txt"}),
        OutcomeKind.BAD_ARGUMENTS: ("read_file", {"paht": "notes.txt"}),
        OutcomeKind.NOT_FOUND: ("bash", {"command": "true"}),  # exists, but not in this allowlist
        OutcomeKind.REFUSED: ("read_file", {"path": "/etc/passwd"}),
        OutcomeKind.FAILED: ("edit", {"path": "notes.txt", "old_string": "gamma", "new_string": "x"}),
    }
    for kind, (name, arguments) in cases.items():
        outcome = tools.execute(name, arguments)
        assert outcome.kind is kind, (name, outcome)
        assert outcome.is_error is (kind is not OutcomeKind.OK)
    assert tools.execute("explode", {}).kind is OutcomeKind.FAILED  # a raising tool
    assert tools.execute("read_file", "{not json").kind is OutcomeKind.BAD_ARGUMENTS
    assert tools.execute("read_file", {"path": "missing.txt"}).kind is OutcomeKind.FAILED


def test_structure_and_trace_reach_the_adapter(world: World) -> None:
    tools = ExposedTools(world.router, FUNCTIONS, MCP_SERVERS)
    stats = tools.execute("word_stats", {"text": "a bb ccc"})
    assert stats.structured == {"words": 3, "longest": "ccc"} and stats.fields == stats.structured
    read = tools.execute("read_file", {"path": "notes.txt"})
    assert read.structured is None and read.fields is None and read.trace["path"] == "notes.txt"
    echo = tools.execute("echo", {"text": "hi"})
    assert echo.trace["mcp"]["tool"] == "echo"


def test_side_effects_and_approval(world: World) -> None:
    everything = ExposedTools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=True)
    read, edit, echo = everything.meta("read_file"), everything.meta("edit"), everything.meta("echo")
    assert (read.read_only, read.destructive, read.needs_approval) == (True, False, False)
    assert (edit.read_only, edit.destructive, edit.needs_approval) == (False, True, True)
    assert echo.needs_approval  # an untrusted server's tool is not read-only
    held = everything.execute("record", {"tag": "held"})
    assert held.kind is OutcomeKind.APPROVAL_NEEDED and world.log.read_text() == ""
    assert everything.execute("record", {"tag": "ran"}, approved=True).kind is OutcomeKind.OK
    assert world.log.read_text() == "ran\n"
    assert everything.execute("read_file", {"path": "notes.txt"}).kind is OutcomeKind.OK  # read-only: no approval

    def rule(name: str, arguments: object) -> bool:
        return name == "write_file" and "secret" in str(arguments)

    by_rule = ExposedTools(world.router, FUNCTIONS, needs_approval=rule)
    assert by_rule.needs_approval("write_file", {"path": "secret.txt", "content": "x"})
    assert not by_rule.needs_approval("write_file", '{"path": "plain.txt", "content": "x"}')
    assert not by_rule.needs_approval("nothing_here", {})
    assert by_rule.execute("write_file", {"path": "secret.txt", "content": "x"}).kind is OutcomeKind.APPROVAL_NEEDED
    assert not (world.workspace / "secret.txt").exists()


@pytest.mark.parametrize("rule", [["record"], ("record",), {"record"}])
def test_named_tools_need_approval(world: World, rule: object) -> None:
    tools = ExposedTools(world.router, FUNCTIONS, needs_approval=rule)  # type: ignore[arg-type]
    assert tools.meta("record").needs_approval and not tools.meta("edit").needs_approval
