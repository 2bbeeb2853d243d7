"""run_tool_calls: model order, read-only parallelism (measured overlap), serial side effects,
failures as results, timeouts."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from _agent_helpers import Workspace, call, make_workspace

from toolroute import ToolRouter, ToolTraits, function_tool
from toolroute.agent import (
    NO_RETRY,
    AgentToolCall,
    RetryPolicy,
    RouterToolExecutor,
    ToolCallRunner,
    allow_all,
    arun_tool_calls,
    run_tool_calls,
)
from toolroute.builtins import BuiltinTool, ToolOutput
from toolroute.router import ToolKind


def test_results_come_back_in_model_order(ws: Workspace) -> None:
    for i in range(6):
        ws.path(f"f{i}").write_text(f"content {i}")
    calls = [call("read_note", f"id{i}", path=f"f{i}") for i in range(6)]
    calls.insert(3, call("write_note", "w", path="new", text="x"))
    results = run_tool_calls(calls, ws.router)
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.output for r in results] == [
        "content 0",
        "content 1",
        "content 2",
        "wrote 1 chars to new",
        "content 3",
        "content 4",
        "content 5",
    ]
    assert [r.metadata["index"] for r in results] == list(range(7))


def test_serial_write_followed_by_read_sees_the_write(ws: Workspace) -> None:
    calls = [
        call("write_note", path="a", text="v1"),
        call("read_note", path="a"),
        call("read_note", path="a"),
        call("write_note", path="a", text="v2"),
        call("read_note", path="a"),
    ]
    results = run_tool_calls(calls, ws.router)
    assert [r.output for r in results] == ["wrote 2 chars to a", "v1", "v1", "wrote 2 chars to a", "v2"]
    assert not any(r.is_error for r in results)


def test_read_only_calls_actually_overlap(tmp_path: Path) -> None:
    # Each call waits inside the tool until 6 are inside at once: the batch only succeeds if
    # all 6 really run concurrently.
    ws = make_workspace(tmp_path, barrier_parties=6)
    for i in range(6):
        ws.path(f"f{i}").write_text("x" * i)
    results = run_tool_calls([call("meeting_read", path=f"f{i}") for i in range(6)], ws.router, max_concurrency=6)
    assert [r.is_error for r in results] == [False] * 6, [r.output for r in results]
    assert ws.gauge.peak == 6
    assert [r.trace for r in results] == [{"path": f"f{i}", "chars": i} for i in range(6)]


def test_max_concurrency_bounds_the_overlap(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, barrier_parties=3)
    ws.path("f").write_text("data")
    results = run_tool_calls([call("meeting_read", path="f") for _ in range(9)], ws.router, max_concurrency=3)
    assert all(not r.is_error for r in results)
    assert ws.gauge.peak == 3


def test_side_effecting_calls_run_alone_and_in_model_order(ws: Workspace) -> None:
    ws.path("r").write_text("r")
    calls = []
    for i in range(5):
        calls += [call("read_note", path="r"), call("read_note", path="r"), call("write_note", path=f"w{i}", text="t")]
    results = run_tool_calls(calls, ws.router, max_concurrency=8)
    assert all(not r.is_error for r in results)
    assert ws.write_log == [f"w{i}" for i in range(5)]
    # nothing else was running while any write ran
    assert ws.concurrent_at_write == [1] * 5


def test_tool_not_declared_read_only_is_serial(ws: Workspace) -> None:
    ws.path("f").write_text("x")
    executor = RouterToolExecutor(ws.router)
    assert executor.traits("undeclared_read") == ToolTraits(read_only=False, idempotent=False)
    runner = ToolCallRunner(executor)
    groups = runner.plan([call("undeclared_read", path="f") for _ in range(4)])
    assert [len(g) for g in groups] == [1, 1, 1, 1]
    results = runner.run([call("undeclared_read", path="f") for _ in range(4)])
    assert [r.output for r in results] == ["x"] * 4
    assert ws.gauge.peak == 1


def test_plan_groups_only_consecutive_read_only_calls(ws: Workspace) -> None:
    runner = ToolCallRunner(ws.router)
    groups = runner.plan(
        [
            call("read_note", path="a"),
            call("read_note", path="b"),
            call("write_note", path="c", text=""),
            call("read_note", path="d"),
            call("explode", message="x"),
            call("read_note", path="e"),
            call("read_note", path="f"),
        ]
    )
    assert [[p.index for p in g] for g in groups] == [[0, 1], [2], [3], [4], [5, 6]]


def test_builtin_bash_is_side_effecting_even_if_declared_read_only(tmp_path: Path) -> None:
    # AI4J lists bash among its read-only tools; whatever the tool table says, a command can
    # do anything, so the agent layer never runs it beside other calls.
    router = ToolRouter()
    fake_bash = BuiltinTool(
        name="bash",
        description="stand-in",
        request_model=make_request_model(),
        handler=lambda request, ctx: ToolOutput("ran"),
        read_only=True,
    )
    router.table.insert(ToolKind.BUILTIN, "bash", fake_bash, True)
    executor = RouterToolExecutor(router)
    assert executor.kind("bash") == "builtin"
    assert executor.traits("bash").read_only is False
    groups = ToolCallRunner(executor).plan([call("bash", command="ls"), call("bash", command="pwd")])
    assert [len(g) for g in groups] == [1, 1]


def make_request_model() -> type:
    from toolroute.builtins import BuiltinRequest

    class BashStandIn(BuiltinRequest):
        command: str = ""

    return BashStandIn


def test_read_only_override_lets_a_host_parallelise_a_proven_safe_call(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, barrier_parties=2)
    router = ws.router

    @function_tool(name="meeting_undeclared")
    def meeting_undeclared(path: str) -> str:
        with ws.gauge.running():
            assert ws.barrier is not None
            ws.barrier.wait()
            return "ok"

    router.register(meeting_undeclared)
    results = run_tool_calls(
        [call("meeting_undeclared", path="x"), call("meeting_undeclared", path="y")],
        router,
        read_only_override=lambda c: True if c.name == "meeting_undeclared" else None,
    )
    assert [r.output for r in results] == ["ok", "ok"]
    assert ws.gauge.peak == 2


def test_every_failure_becomes_a_result_and_the_batch_goes_on(ws: Workspace) -> None:
    ws.path("ok").write_text("fine")
    calls = [
        call("read_nte", path="ok"),
        AgentToolCall("read_note", "{not json"),
        call("read_note", wrong="x"),
        call("explode", message="kaboom"),
        AgentToolCall("", "{}"),
        call("read_note", path="missing"),
        call("read_note", path="ok"),
    ]
    results = run_tool_calls(calls, ws.router, retry=RetryPolicy(initial_delay=0.0))
    assert [r.is_error for r in results] == [True] * 6 + [False]
    assert [r.error_type for r in results[:6]] == [
        "ToolNotFoundError",
        "ToolArgumentError",
        "ToolArgumentError",
        "ToolExecutionError",
        "InvalidToolCall",
        "ToolExecutionError",
    ]
    assert "did you mean 'read_note'" in results[0].output
    assert "not valid JSON" in results[1].output
    assert "path: Field required" in results[2].output
    assert "RuntimeError: kaboom" in results[3].output
    assert "tool name is required" in results[4].output
    assert "FileNotFoundError" in results[5].output
    assert results[5].attempts == 3  # read_note is idempotent: a failed execution is retried
    assert [r.attempts for r in results[:5]] == [1] * 5  # the model's mistakes are not
    assert results[6].output == "fine"


def test_allowed_names_limit_what_the_executor_runs(ws: Workspace) -> None:
    ws.path("f").write_text("secret")
    executor = RouterToolExecutor(ws.router, allowed={"write_note"})
    result = executor.execute(call("read_note", path="f"))
    assert result.is_error and result.error_type == "ToolNotFoundError"
    assert "not exposed to this request" in result.output


def test_for_request_executes_only_the_exposed_tools(ws: Workspace) -> None:
    ws.path("f").write_text("visible")
    executor = RouterToolExecutor.for_request(ws.router, function_list=["read_note"])
    results = run_tool_calls([call("read_note", path="f"), call("write_note", path="g", text="x")], executor)
    assert results[0].output == "visible"
    assert results[1].error_type == "ToolNotFoundError" and "not exposed" in results[1].output
    assert not ws.path("g").exists()


def test_accepts_openai_and_anthropic_shaped_calls(ws: Workspace) -> None:
    ws.path("f").write_text("hello")
    openai_call = {"id": "call_abc", "type": "function", "function": {"name": "read_note", "arguments": '{"path":"f"}'}}
    anthropic_block = {"type": "tool_use", "id": "toolu_1", "name": "read_note", "input": {"path": "f"}}
    results = run_tool_calls(
        [openai_call, anthropic_block, {"name": "read_note", "arguments": {"path": "f"}}], ws.router
    )
    assert [(r.call_id, r.output) for r in results] == [
        ("call_abc", "hello"),
        ("toolu_1", "hello"),
        ("call_2", "hello"),
    ]


def test_a_hung_sync_call_times_out_and_the_batch_continues(ws: Workspace) -> None:
    try:
        results = run_tool_calls(
            [call("hang_write", label="a"), call("write_note", path="after", text="t")],
            ws.router,
            timeout=0.2,
            retry=NO_RETRY,
        )
    finally:
        ws.release.set()
    assert results[0].is_error and results[0].error_type == "ToolTimeoutError"
    assert "did not finish within 0.2s" in results[0].output
    assert "side effects may still happen" in results[0].output
    assert results[1].output == "wrote 1 chars to after"
    assert ws.path("after").read_text() == "t"


def test_per_tool_timeouts_and_async_tools_are_cancelled(ws: Workspace) -> None:
    @function_tool(name="forever", read_only=True)
    async def forever() -> str:
        await anyio.sleep_forever()
        return "never"

    ws.router.register(forever)
    results = run_tool_calls(
        [call("forever"), call("read_note", path="x")], ws.router, timeouts={"forever": 0.1}, retry=NO_RETRY
    )
    assert results[0].error_type == "ToolTimeoutError"
    assert "side effects" not in results[0].output  # read-only: nothing to worry about
    assert results[1].error_type == "ToolExecutionError"  # ran (and failed on the missing file), no timeout


@pytest.mark.anyio
async def test_async_entry_point_runs_inside_an_event_loop(ws: Workspace) -> None:
    ws.path("f").write_text("async")
    results = await arun_tool_calls([call("read_note", path="f")], ws.router)
    assert results[0].output == "async"
    # and the sync form works from inside a running loop too
    assert run_tool_calls([call("read_note", path="f")], ws.router)[0].output == "async"


def test_default_policy_is_safe_and_explains_itself(ws: Workspace) -> None:
    results = run_tool_calls([call("bash", action="exec", command="touch pwned")], ws.router)
    assert results[0].is_error and results[0].error_type == "ToolCallDenied"
    assert "no approver" in results[0].output and "allow_all()" in results[0].output
    assert not ws.path("pwned").exists()
    # the same batch with an explicit opt-out reaches the router (no bash on this router)
    opted_out = run_tool_calls([call("bash", action="exec", command="true")], ToolRouter(), policy=allow_all())
    assert opted_out[0].error_type in {"ToolNotFoundError", "ToolExecutionError"}


@pytest.mark.anyio
async def test_read_only_calls_overlap_under_the_async_entry_point_too(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, barrier_parties=4)
    ws.path("f").write_text("shared")
    results = await arun_tool_calls([call("meeting_read", path="f") for _ in range(8)], ws.router, max_concurrency=4)
    assert [r.output for r in results] == ["shared"] * 8
    assert ws.gauge.peak == 4


def test_a_group_mixing_async_and_sync_read_only_tools(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, barrier_parties=3)
    ws.path("f").write_text("sync side")

    @function_tool(name="async_lookup", read_only=True)
    async def async_lookup(key: str) -> str:
        await anyio.sleep(0)
        return f"async {key}"

    ws.router.register(async_lookup)
    calls = [call("meeting_read", path="f"), call("async_lookup", key="a"), call("meeting_read", path="f")]
    calls += [call("async_lookup", key="b"), call("meeting_read", path="f")]
    runner = ToolCallRunner(ws.router, max_concurrency=5)
    assert [len(g) for g in runner.plan(calls)] == [5]
    results = runner.run(calls)
    assert [r.output for r in results] == ["sync side", "async a", "sync side", "async b", "sync side"]
    assert ws.gauge.peak == 3  # the three sync reads met inside the tool at once
