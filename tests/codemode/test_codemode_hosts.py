"""Code mode's inner calls keep every rule of the host that ran the code tool: the agent layer's
policy, approver and sinks; an adapter's approval rule; served mode's allowlist, sandbox and
audit (a real `toolroute serve` over HTTP with API keys); and served mode's refusal to offer a
program runner to many users without what bash needs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _serve_helpers import TOOLS_MODULE, http_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute.agent import (
    AgentToolCall,
    ApprovalRequest,
    Decision,
    IoCapture,
    RouterToolExecutor,
    Rule,
    RulePolicy,
    ToolCallRunner,
    Verdict,
)
from toolroute.allowlist import ExposedTools
from toolroute.errors import ToolArgumentError
from toolroute.serve.isolation import tenant_base_context
from toolroute.serve.store import UserStore

PROGRAM = """
import tools
for name, arguments in [("write_file", {"path": "w.txt", "content": "x"}), ("tally", {"n": 2}),
                        ("read_file", {"path": "r.txt"})]:
    try:
        print(name, "ok", str(tools.call(name, **arguments))[:40].replace("\\n", " "))
    except tools.ToolError as e:
        print(name, "error", e.kind)
"""


@function_tool(name="tally", description="Count to n.")
def tally(n: int) -> list[int]:
    return list(range(n))


@pytest.fixture
def router(deployed: Path) -> Iterator[ToolRouter]:
    (deployed / "r.txt").write_text("readable\n")
    with ToolRouter(context=BuiltInToolContext(deployed)) as r:
        r.register(tally)
        yield r


def test_the_agent_layer_decides_and_records_each_inner_call(router: ToolRouter, deployed: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    policy = RulePolicy(
        [Rule("write_file", Verdict.DENY, "no writes from programs"), Rule("tally", Verdict.ASK, "counting")]
    )
    capture = IoCapture()
    executor = RouterToolExecutor.for_request(router, ["write_file", "tally", "read_file", "run_code"])
    runner = ToolCallRunner(executor, policy=policy, approver=approver, sinks=[capture])
    [result] = runner.run([AgentToolCall("run_code", {"code": PROGRAM}, "c1")])
    assert not result.is_error, result.output
    assert result.output.splitlines() == [
        "write_file error ToolCallDenied",
        "tally ok [0, 1]",
        "read_file ok      1\treadable",
    ]
    assert not (deployed / "w.txt").exists()
    assert [(r.call.name, r.call.call_id) for r in asked] == [("tally", "c1.2")]
    recorded = [(r.call.call_id, r.call.name, r.result.is_error) for r in capture.records]
    assert recorded == [
        ("c1.1", "write_file", True),
        ("c1.2", "tally", False),
        ("c1.3", "read_file", False),
        ("c1", "run_code", False),
    ]
    assert [c["name"] for c in result.trace["calls"]] == ["write_file", "tally", "read_file"]


def test_without_an_approver_an_inner_call_that_asks_is_refused(router: ToolRouter, deployed: Path) -> None:
    policy = RulePolicy([Rule("tally", Verdict.ASK, "counting")], Decision.allow())
    executor = RouterToolExecutor.for_request(router, ["write_file", "tally", "read_file", "run_code"])
    [result] = ToolCallRunner(executor, policy=policy).run([AgentToolCall("run_code", {"code": PROGRAM}, "c1")])
    assert result.output.splitlines()[:2] == ["write_file ok Created w.txt (1 bytes).", "tally error ToolCallDenied"]
    assert (deployed / "w.txt").read_text() == "x"


def test_the_code_tool_exists_only_in_a_request_that_lists_it(router: ToolRouter) -> None:
    # its program's catalogue is the request's: a router-wide `run_code` would have none to call
    [result] = ToolCallRunner(router).run([AgentToolCall("run_code", {"code": "print(1)"}, "c1")])
    assert result.is_error and result.error_type == "ToolNotFoundError"


def test_an_adapters_approval_rule_holds_a_programs_calls(router: ToolRouter, deployed: Path) -> None:
    door = ExposedTools(router, ["write_file", "tally", "read_file", "run_code"], needs_approval=["write_file"])
    outcome = door.execute("run_code", {"code": PROGRAM})
    assert not outcome.is_error
    assert outcome.text.splitlines() == [
        "write_file error approval_needed",
        "tally ok [0, 1]",
        "read_file ok      1\treadable",
    ]
    assert not (deployed / "w.txt").exists()


def test_served_mode_refuses_a_program_runner_without_what_bash_needs(deployed: Path) -> None:
    with pytest.raises(ToolArgumentError, match="workspace-template"):
        tenant_base_context(
            BuiltInToolContext(deployed), ["run_code"], workspace_template=None, uids=None, secret_files=[]
        )
    with pytest.raises(ToolArgumentError, match="run_code to many users without a sandbox"):
        tenant_base_context(
            BuiltInToolContext(deployed),
            ["run_code"],
            workspace_template=str(deployed / "ws" / "{user}"),
            uids=None,
            secret_files=[],
        )


async def _call(url: str, key: str, name: str, arguments: dict[str, Any]) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        return listed, await client.call_tool(name, arguments)


def test_served_programs_call_only_their_users_tools_each_call_audited(deployed: Path) -> None:
    store_url = f"sqlite:///{deployed / 'users.db'}"
    with UserStore(store_url) as store:
        store.add_user("alice")
        key = store.add_key("alice")
    audit = deployed / "audit.jsonl"
    args = [
        *("--modules", TOOLS_MODULE, "--functions", "echo,read_file,run_code", "--api-keys", "--store", store_url),
        *("--workspace-template", str(deployed / "ws" / "{user}"), "--audit-log", str(audit), "--sandbox", "on"),
    ]
    program = """
import tools
print(echo(text="hi", times=2))
for name, arguments in [("read_file", {"path": "missing.txt"}), ("bash", {"command": "id"})]:
    try:
        tools.call(name, **arguments)
    except tools.ToolError as e:
        print(name, e.kind)
print(open("/etc/hostname").read() != "")
"""
    with http_server(args) as url:
        listed, result = anyio.run(_call, url, key, "run_code", {"code": program})
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while len(lines) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
            lines = audit.read_text().splitlines() if audit.exists() else []
    text = result.content[0].text
    assert len(lines) == 4, (text, lines)
    assert listed == ["echo", "read_file", "run_code"]
    assert not result.is_error, text
    assert text.splitlines() == ["hihi", "read_file failed", "bash not_found", "True"]
    records = [json.loads(line) for line in lines]
    got = [(r["tool"], r["outcome"], r["caller"]) for r in records]
    assert got == [
        ("echo", "ok", "run_code"),
        ("read_file", "error", "run_code"),
        ("bash", "refused", "run_code"),
        ("run_code", "ok", None),
    ]
    assert {r["user"] for r in records} == {"alice"}


def test_a_served_programs_calls_count_against_its_users_limits(deployed: Path) -> None:
    store_url = f"sqlite:///{deployed / 'users.db'}"
    with UserStore(store_url) as store:
        store.add_user("alice")
        key = store.add_key("alice")
    args = [
        *("--modules", TOOLS_MODULE, "--functions", "echo,run_code", "--api-keys", "--store", store_url),
        *("--workspace-template", str(deployed / "ws" / "{user}"), "--sandbox", "on"),
        *("--calls-per-minute", "3", "--max-argument-bytes", "1000"),
    ]
    program = """
import tools
for text in ["a", "x" * 1500, "b", "c", "d"]:
    try:
        print(tools.echo(text=text)[:3])
    except tools.ToolError as e:
        print(e.kind, "last minute" in e.message or "bytes" in e.message)
"""
    with http_server(args) as url:
        _, result = anyio.run(_call, url, key, "run_code", {"code": program})
    # run_code itself is the first of three calls a minute; the oversized one is refused and
    # not counted, so "b" is the third; "c" and "d" are over the limit
    assert result.content[0].text.splitlines() == ["a", "refused True", "b", "refused True", "refused True"]
