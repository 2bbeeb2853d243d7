"""JSONL traces: round trip, replay without execution, crash safety."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _agent_helpers import Workspace, call, make_workspace

from toolroute import ToolOutput, function_tool
from toolroute.agent import (
    AgentToolCall,
    IoCapture,
    JsonlTraceStore,
    ReplayExecutor,
    allow_all,
    load_results,
    read_trace,
    run_tool_calls,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = make_workspace(tmp_path / "ws")
    ws.root.mkdir()
    return ws


def batch() -> list[AgentToolCall]:
    return [
        call("write_note", "c0", path="a", text="hello"),
        call("read_note", "c1", path="a"),
        call("meeting_read", "c2", path="a"),  # fails: this workspace has no barrier
        call("read_nope", "c3"),
        call("write_note", "c4", path="a", text="bye"),
        call("read_note", "c5", path="a"),
    ]


def test_jsonl_round_trip(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "trace" / "run.jsonl"
    with JsonlTraceStore(path, run_id="run-1") as store:
        results = run_tool_calls(batch(), ws.router, sinks=[store])
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    assert path.stat().st_mode & 0o777 == 0o600  # arguments and results are nobody else's to read
    assert all(json.loads(line)["run_id"] == "run-1" for line in lines)
    records = read_trace(path, strict=True)
    assert [r.seq for r in records] == [1, 2, 3, 4, 5, 6]
    # records are in completion order (c1 and c2 ran concurrently); metadata keeps the model's
    records.sort(key=lambda r: r.result.metadata["index"])
    assert [r.call for r in records] == batch()
    assert [r.result.to_dict() for r in records] == [r.to_dict() for r in results]
    loaded = sorted(load_results(path), key=lambda r: r.metadata["index"])
    assert [(r.call_id, r.output, r.is_error, r.error_type) for r in loaded] == [
        (r.call_id, r.output, r.is_error, r.error_type) for r in results
    ]
    assert loaded[2].is_error and loaded[3].error_type == "ToolNotFoundError"
    assert loaded[0].metadata["read_only"] is False and loaded[1].metadata["read_only"] is True


def test_structured_traces_persist_as_json(ws: Workspace, tmp_path: Path) -> None:
    @function_tool(name="stats", read_only=True)
    def stats(path: str) -> ToolOutput:
        text = ws.path(path).read_text()
        return ToolOutput(str(len(text)), trace={"path": ws.path(path), "lines": text.count("\n"), "tags": ("a", "b")})

    ws.router.register(stats)
    ws.path("f").write_text("1\n2\n")
    store_path = tmp_path / "t.jsonl"
    with JsonlTraceStore(store_path) as store:
        run_tool_calls([call("stats", path="f")], ws.router, sinks=[store])
    (record,) = read_trace(store_path)
    assert record.result.trace == {"path": str(ws.path("f")), "lines": 2, "tags": ["a", "b"]}


def test_replay_answers_from_the_trace_without_executing(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with JsonlTraceStore(path) as store:
        original = run_tool_calls(batch(), ws.router, sinks=[store])
    ws.path("a").write_text("changed since")  # a live run would now read this
    replay = ReplayExecutor(path)
    replayed = run_tool_calls(batch(), replay, policy=allow_all())
    assert [r.output for r in replayed] == [r.output for r in original]
    assert [r.is_error for r in replayed] == [r.is_error for r in original]
    assert all(r.metadata["replayed"] for r in replayed)
    assert ws.path("a").read_text() == "changed since"  # no write was executed
    assert replay.unused == []


def test_replay_matches_by_arguments_when_call_ids_differ(tmp_path: Path, ws: Workspace) -> None:
    path = tmp_path / "run.jsonl"
    with JsonlTraceStore(path) as store:
        run_tool_calls(
            [
                call("write_note", "x1", path="n", text="1"),
                call("read_note", "x2", path="n"),
                call("write_note", "x3", path="n", text="22"),
                call("read_note", "x4", path="n"),
            ],
            ws.router,
            sinks=[store],
        )
    replay = ReplayExecutor(read_trace(path))
    # a new model run: new call ids, keys in another order, the same calls
    fresh = [
        AgentToolCall("write_note", '{"text": "1", "path": "n"}', "new1"),
        AgentToolCall("read_note", {"path": "n"}, "new2"),
        AgentToolCall("write_note", {"path": "n", "text": "22"}, "new3"),
        AgentToolCall("read_note", {"path": "n"}, "new4"),
        AgentToolCall("read_note", {"path": "elsewhere"}, "new5"),
    ]
    results = run_tool_calls(fresh, replay, policy=allow_all())
    assert [r.call_id for r in results] == ["new1", "new2", "new3", "new4", "new5"]
    assert [r.output for r in results[:4]] == ["wrote 1 chars to n", "1", "wrote 2 chars to n", "22"]
    assert results[4].is_error and results[4].error_type == "ReplayMiss"
    assert "never executes tools" in results[4].output


def test_replay_falls_back_to_live_execution_when_asked(tmp_path: Path, ws: Workspace) -> None:
    ws.path("live").write_text("live data")
    from toolroute.agent import RouterToolExecutor

    replay = ReplayExecutor([], fallback=RouterToolExecutor(ws.router))
    (result,) = run_tool_calls([call("read_note", path="live")], replay)
    assert result.output == "live data"


CRASHING_RUN = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from toolroute import ToolRouter, function_tool
    from toolroute.agent import AgentToolCall, JsonlTraceStore, run_tool_calls

    root = Path(sys.argv[1])

    @function_tool(name="write_note")
    def write_note(path: str, text: str) -> str:
        (root / path).write_text(text)
        return "wrote " + path

    @function_tool(name="crash")
    def crash() -> str:
        os._exit(17)  # the process dies mid-batch: no cleanup, no close()

    router = ToolRouter()
    router.register(write_note)
    router.register(crash)
    store = JsonlTraceStore(root / "trace.jsonl", run_id="crashed")
    calls = [
        AgentToolCall("write_note", json.dumps({"path": "one", "text": "1"}), "w1"),
        AgentToolCall("write_note", json.dumps({"path": "two", "text": "2"}), "w2"),
        AgentToolCall("crash", "{}", "boom"),
        AgentToolCall("write_note", json.dumps({"path": "three", "text": "3"}), "w3"),
    ]
    run_tool_calls(calls, router, sinks=[store])
    """
)


def test_a_crash_mid_batch_leaves_a_readable_trace(tmp_path: Path) -> None:
    script = tmp_path / "crashing_run.py"
    script.write_text(CRASHING_RUN)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 17, proc.stderr
    trace = tmp_path / "trace.jsonl"
    records = read_trace(trace, strict=True)
    assert [(r.call.call_id, r.result.output) for r in records] == [("w1", "wrote one"), ("w2", "wrote two")]
    assert not (tmp_path / "three").exists()
    # the run can be resumed into the same file
    with JsonlTraceStore(trace, run_id="resumed") as store:
        store.record(AgentToolCall("note", "{}", "r1"), load_results(trace)[0])
    assert [r.run_id for r in read_trace(trace, strict=True)] == ["crashed", "crashed", "resumed"]


def test_a_torn_last_line_is_skipped_and_the_next_record_stays_readable(tmp_path: Path, ws: Workspace) -> None:
    path = tmp_path / "run.jsonl"
    with JsonlTraceStore(path) as store:
        run_tool_calls([call("write_note", "a", path="x", text="1")], ws.router, sinks=[store])
    with path.open("a") as f:
        f.write('{"v": 1, "run_id": "torn", "seq": 2, "call": {"na')  # killed mid-write
    assert [r.call.call_id for r in read_trace(path)] == ["a"]
    with pytest.raises(ValueError, match=r"run.jsonl:2"):
        read_trace(path, strict=True)
    with JsonlTraceStore(path) as store:
        run_tool_calls([call("write_note", "b", path="y", text="2")], ws.router, sinks=[store])
    assert [r.call.call_id for r in read_trace(path)] == ["a", "b"]


def test_a_broken_sink_does_not_break_the_batch(ws: Workspace, tmp_path: Path) -> None:
    closed = JsonlTraceStore(tmp_path / "closed.jsonl")
    closed.close()
    capture = IoCapture()
    results = run_tool_calls([call("write_note", path="z", text="ok")], ws.router, sinks=[closed, capture])
    assert results[0].output == "wrote 2 chars to z"
    assert len(capture) == 1
