"""One scripted agent run, the same for every framework adapter (issue 42): what the scripted
model calls, turn by turn, and what each call's answer must show. Each framework's test turns
these calls into its own test model's tool calls and reads the answers back from what that
model was sent."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _framework_tools import LOG_ENV
from _mcp_helpers import demo_stdio

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.mcp.gateway import McpGateway

FUNCTIONS = ["read_file", "edit", "write_file", "word_stats", "explode", "record"]
MCP_SERVERS = ["demo"]
NEEDS_APPROVAL = ["record"]


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: dict[str, Any]
    expect: str  # a fragment the answer the model gets must hold (lower-cased comparison)


TURNS: list[list[Call]] = [
    # A parallel batch: a custom function tool (structured), a built-in, an MCP tool.
    [
        Call("c1", "word_stats", {"text": "tool routers route"}, '"words": 3'),
        Call("c2", "read_file", {"path": "notes.txt"}, "alpha"),
        Call("c3", "echo", {"text": "hi"}, "hi"),
    ],
    # Every error kind, none of which may end the run.
    [
        Call("e1", "read_file", {"paht": "notes.txt"}, "invalid arguments"),  # bad arguments
        Call("e2", "explode", {"reason": "on purpose"}, "exploded: on purpose"),  # a raising tool
        Call("e3", "no_such_tool", {}, "no_such_tool"),  # an invented name
        Call("e4", "read_file", {"path": "/etc/passwd"}, "outside the allowed roots"),  # a path outside the workspace
        Call("e5", "edit", {"path": "notes.txt", "old_string": "gamma", "new_string": "x"}, "not found"),
    ],
    [Call("e6", "edit", {"path": "notes.txt", "old_string": "gamma", "new_string": "x"}, "not found")],  # twice
    # Approval: one approved, one rejected.
    [Call("a1", "record", {"tag": "approved"}, "recorded approved"), Call("a2", "record", {"tag": "rejected"}, "")],
]
FINAL = "all done"
APPROVED, REJECTED = "a1", "a2"


@dataclass
class World:
    router: ToolRouter
    workspace: Path
    log: Path
    seen: dict[str, str] = field(default_factory=dict)  # call id -> the answer the model got

    def check(self, expect: dict[str, str] | None = None) -> None:
        """Every scripted call was answered as expected (or as `expect` says, where a framework
        answers a call itself, in its own words); the approved call ran once, the rejected one
        never; the workspace file was never changed by the failing edits."""
        for turn in TURNS:
            for scripted in turn:
                call = Call(
                    scripted.id, scripted.name, scripted.arguments, (expect or {}).get(scripted.id, scripted.expect)
                )
                assert call.id in self.seen, f"{call.id} ({call.name}) got no answer: {sorted(self.seen)}"

                # JSON's spacing and quotes differ by framework (a dict's repr, compact JSON).
                def squeeze(text: str) -> str:
                    return "".join(text.lower().replace("'", '"').split())

                assert squeeze(call.expect) in squeeze(self.seen[call.id]), (call, self.seen[call.id])
        assert self.log.read_text().splitlines() == ["approved"]
        assert (self.workspace / "notes.txt").read_text() == "alpha\nbeta\n"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha\nbeta\n")
    log = tmp_path / "record.log"
    log.write_text("")
    os.environ[LOG_ENV] = str(log)
    # The demo server, with a tool whose name is no Python identifier (smolagents needs one).
    gateway = McpGateway({"mcpServers": {"demo": demo_stdio("demo", "word-count")}})
    router = ToolRouter(packages=["_framework_tools"], gateway=gateway, context=BuiltInToolContext(workspace))
    try:
        yield World(router, workspace, log)
    finally:
        router.close()
        os.environ.pop(LOG_ENV, None)
