"""The agent layer over the real built-in tools (skipped until they are merged onto this branch)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _agent_helpers import call

from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context
from toolroute.agent import (
    ApprovalRequest,
    JsonlTraceStore,
    RouterToolExecutor,
    ToolCallRunner,
    allow_all,
    read_trace,
    run_tool_calls,
    safe_policy,
)


@pytest.fixture
def router(tmp_path: Path) -> Iterator[ToolRouter]:
    (tmp_path / "src").mkdir()
    for i in range(10):
        (tmp_path / "src" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}  # TODO {i}\n")
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as r:
        yield r


def test_read_only_builtins_are_scheduled_together(router: ToolRouter) -> None:
    executor = RouterToolExecutor(router)
    for name in ("read_file", "grep", "glob"):
        assert executor.traits(name).read_only is True
    calls = [call("read_file", path=f"src/m{i}.py") for i in range(5)]
    calls += [call("grep", pattern="TODO", path="src"), call("glob", pattern="**/*.py")]
    groups = ToolCallRunner(executor).plan(calls)
    assert [len(g) for g in groups] == [7]
    results = run_tool_calls(calls, executor)
    assert not any(r.is_error for r in results), [r.output for r in results if r.is_error]
    for i in range(5):
        assert f"return {i}" in results[i].output
    assert all(isinstance(r.trace, dict) and r.trace for r in results)  # structured facts
    assert "m7.py" in results[5].output and "m3.py" in results[6].output


def test_side_effecting_builtins_are_serial(router: ToolRouter) -> None:
    executor = RouterToolExecutor(router)
    for name in ("write_file", "edit", "apply_patch", "bash", "update_agents_md"):
        assert executor.traits(name).read_only is False, name
        assert executor.traits(name).idempotent is False, name


def test_write_then_read_in_one_batch_sees_the_write(router: ToolRouter, tmp_path: Path) -> None:
    calls = [
        call("write_file", path="notes.txt", content="first version\n"),
        call("read_file", path="notes.txt"),
        call("edit", path="notes.txt", old_string="first", new_string="second"),
        call("read_file", path="notes.txt"),
    ]
    results = run_tool_calls(calls, router, policy=allow_all())
    assert not any(r.is_error for r in results), [r.output for r in results]
    assert "first version" in results[1].output
    assert "second version" in results[3].output and "first" not in results[3].output
    assert (tmp_path / "notes.txt").read_text() == "second version\n"


def test_safe_policy_gates_builtin_writes_and_commands(router: ToolRouter, tmp_path: Path) -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call.name)
        return request.call.name != "bash"

    patch = "*** Begin Patch\n*** Add File: added.txt\n+patched\n*** End Patch"
    results = run_tool_calls(
        [
            call("write_file", path="w.txt", content="ok"),
            call("apply_patch", patch=patch),
            call("bash", action="exec", command="touch should_not_exist"),
        ],
        router,
        policy=safe_policy(),
        approver=approver,
    )
    assert asked == ["write_file", "apply_patch", "bash"]
    assert not results[0].is_error and (tmp_path / "w.txt").read_text() == "ok"
    assert not results[1].is_error and (tmp_path / "added.txt").exists()
    assert results[1].trace is not None
    assert results[2].error_type == "ApprovalRejected"
    assert not (tmp_path / "should_not_exist").exists()


def test_bash_exit_code_reaches_the_trace_and_the_jsonl(router: ToolRouter, tmp_path: Path) -> None:
    store_path = tmp_path / "trace.jsonl"
    with JsonlTraceStore(store_path) as store:
        results = run_tool_calls(
            [call("bash", action="exec", command="echo hi; exit 3")], router, policy=allow_all(), sinks=[store]
        )
    assert results[0].trace["exitCode"] == 3
    assert "hi" in results[0].output
    (record,) = read_trace(store_path)
    assert record.result.trace["exitCode"] == 3


def test_builtin_context_is_carried_into_parallel_calls(tmp_path: Path) -> None:
    # no router default: the context pushed by the caller must reach every worker thread
    (tmp_path / "f.txt").write_text("from the pushed context\n")
    with builtin_tool_context(BuiltInToolContext(tmp_path)):
        results = run_tool_calls([call("read_file", path="f.txt") for _ in range(8)], ToolRouter())
    assert all("from the pushed context" in r.output for r in results), [r.output for r in results]
