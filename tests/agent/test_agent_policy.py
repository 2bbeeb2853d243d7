"""Approval: allow / deny / ask through the batch runner, rule matching, the ready safe policy."""

from __future__ import annotations

import pytest
from _agent_helpers import Workspace, call

from toolroute.agent import (
    AgentToolCall,
    ApprovalRequest,
    Decision,
    Rule,
    RulePolicy,
    Verdict,
    allow_all,
    allow_tools,
    deny_all,
    run_tool_calls,
    safe_policy,
)


@pytest.mark.parametrize("tool", ["write_file", "apply_patch", "edit", "bash"])
def test_safe_policy_asks_for_side_effecting_builtins(tool: str) -> None:
    decision = safe_policy().decide(call(tool, path="x"))
    assert decision.verdict is Verdict.ASK
    assert tool in decision.reason


@pytest.mark.parametrize("tool", ["read_file", "grep", "glob", "some_function_tool"])
def test_safe_policy_allows_reads_and_other_tools(tool: str) -> None:
    assert safe_policy().decide(call(tool, path="x")).verdict is Verdict.ALLOW


def test_safe_policy_asks_only_for_agents_md_writes() -> None:
    policy = safe_policy()
    assert policy.decide(call("update_agents_md", action="read")).verdict is Verdict.ALLOW
    assert policy.decide(call("update_agents_md", action="append", text="x")).verdict is Verdict.ASK


def test_rule_on_argument_pattern() -> None:
    policy = safe_policy().extended(
        Rule("bash", Verdict.ASK, "destructive command", arguments={"command": r"\brm\s+-[a-z]*r[a-z]*f"}),
        Rule("bash", Verdict.ALLOW, arguments={"command": r"^(ls|pwd|git status)\b"}),
    )
    assert policy.decide(call("bash", action="exec", command="cd x && rm -rf /")).reason == "destructive command"
    assert policy.decide(call("bash", action="exec", command="ls -la")).verdict is Verdict.ALLOW
    # not matched by the allow rule: falls through to the safe rule
    assert policy.decide(call("bash", action="exec", command="make")).verdict is Verdict.ASK
    # an absent argument fails its condition
    assert policy.decide(call("bash", action="list")).verdict is Verdict.ASK


def test_rule_predicates_and_name_patterns() -> None:
    policy = RulePolicy(
        [
            Rule("mcp_*", Verdict.DENY, "big transfer", arguments={"amount": lambda v: v > 100}),
            Rule(("mcp_*", "pay"), Verdict.ALLOW, when=lambda args: args.get("currency") == "EUR"),
        ],
        default=Decision.deny("unknown tool"),
    )
    assert policy.decide(call("mcp_bank_pay", amount=500, currency="EUR")).verdict is Verdict.DENY
    assert policy.decide(call("mcp_bank_pay", amount=5, currency="EUR")).verdict is Verdict.ALLOW
    assert policy.decide(call("pay", amount=5, currency="USD")).reason == "unknown tool"


def test_unreadable_arguments_fail_closed() -> None:
    garbled = AgentToolCall("bash", '{"command": "rm -rf /"')
    ask_rm = Rule("bash", Verdict.ASK, arguments={"command": "rm"})
    allow_ls = Rule("bash", Verdict.ALLOW, arguments={"command": "^ls"})
    assert ask_rm.matches(garbled)  # a deny/ask rule cannot be dodged with broken JSON
    assert not allow_ls.matches(garbled)  # and an allow rule cannot be satisfied by it


def test_deny_is_a_result_the_model_reads_and_nothing_runs(ws: Workspace) -> None:
    policy = RulePolicy([Rule("write_note", Verdict.DENY, "writes are frozen during the release")])
    results = run_tool_calls(
        [call("write_note", path="a", text="x"), call("read_note", path="b")], ws.router, policy=policy
    )
    assert results[0].is_error and results[0].error_type == "ToolCallDenied"
    assert "writes are frozen during the release" in results[0].output
    assert not ws.path("a").exists()
    assert results[1].error_type == "ToolExecutionError"  # the next call still ran


def test_deny_all_and_allow_tools(ws: Workspace) -> None:
    ws.path("f").write_text("x")
    assert run_tool_calls([call("read_note", path="f")], ws.router, policy=deny_all())[0].is_error
    only_reads = allow_tools(["read_*"])
    results = run_tool_calls(
        [call("read_note", path="f"), call("write_note", path="g", text="y")], ws.router, policy=only_reads
    )
    assert results[0].output == "x"
    assert "not in the allow list" in results[1].output
    assert not ws.path("g").exists()


def test_ask_awaits_the_async_approver(ws: Workspace) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool | Decision:
        asked.append(request)
        args = request.call.parsed_arguments() or {}
        return True if args["path"] == "ok" else Decision.deny("not that file")

    policy = RulePolicy([Rule("write_note", Verdict.ASK, "writes need a human")])
    results = run_tool_calls(
        [call("write_note", "w1", path="ok", text="1"), call("write_note", "w2", path="no", text="2")],
        ws.router,
        policy=policy,
        approver=approver,
    )
    assert [a.call.call_id for a in asked] == ["w1", "w2"]
    assert all(a.reason == "writes need a human" for a in asked)
    assert results[0].output == "wrote 1 chars to ok" and ws.path("ok").read_text() == "1"
    assert results[1].error_type == "ApprovalRejected" and "not that file" in results[1].output
    assert not ws.path("no").exists()


def test_ask_without_approver_fails_closed(ws: Workspace) -> None:
    results = run_tool_calls(
        [call("write_note", path="a", text="x")], ws.router, policy=RulePolicy([Rule("*", Verdict.ASK, "all")])
    )
    assert results[0].error_type == "ToolCallDenied" and "no approver" in results[0].output
    assert not ws.path("a").exists()


def test_sync_approver_and_approver_errors(ws: Workspace) -> None:
    policy = RulePolicy([Rule("write_note", Verdict.ASK)])

    def broken(request: ApprovalRequest) -> bool:
        raise ConnectionError("approval UI is down")

    ok = run_tool_calls([call("write_note", path="a", text="x")], ws.router, policy=policy, approver=lambda r: True)
    assert not ok[0].is_error
    bad = run_tool_calls([call("write_note", path="b", text="x")], ws.router, policy=policy, approver=broken)
    assert bad[0].error_type == "ApprovalRejected" and "approval UI is down" in bad[0].output
    assert not ws.path("b").exists()


def test_a_failing_policy_denies(ws: Workspace) -> None:
    class Broken:
        def decide(self, call: AgentToolCall) -> Decision:
            raise KeyError("rules file missing")

    results = run_tool_calls([call("read_note", path="f")], ws.router, policy=Broken())
    assert results[0].error_type == "ToolCallDenied" and "rules file missing" in results[0].output


def test_approvals_in_a_parallel_group_are_asked_in_model_order(ws: Workspace) -> None:
    for i in range(5):
        ws.path(f"f{i}").write_text(str(i))
    order: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        order.append(request.call.call_id)
        return request.call.call_id != "r2"

    results = run_tool_calls(
        [call("read_note", f"r{i}", path=f"f{i}") for i in range(5)],
        ws.router,
        policy=RulePolicy([Rule("read_note", Verdict.ASK)]),
        approver=approver,
    )
    assert order == [f"r{i}" for i in range(5)]
    assert [r.output for r in results[:2] + results[3:]] == ["0", "1", "3", "4"]
    assert results[2].error_type == "ApprovalRejected"


def test_allow_all_opts_out_of_the_safe_default(ws: Workspace) -> None:
    assert allow_all().decide(call("bash", command="rm -rf /")).verdict is Verdict.ALLOW
