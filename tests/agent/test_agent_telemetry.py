"""OpenTelemetry spans per call with the SDK's in-memory exporter; a no-op without the API."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _agent_helpers import make_workspace

from toolroute.agent import AgentToolCall, Rule, RulePolicy, ToolTelemetry, Verdict, run_tool_calls

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402


def test_one_span_per_call_with_name_kind_duration_and_error(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ws = make_workspace(tmp_path)
    ws.path("f").write_text("x")
    calls = [
        AgentToolCall("read_note", json.dumps({"path": "f"}), "ok"),
        AgentToolCall("explode", json.dumps({"message": "bad"}), "err"),
        AgentToolCall("write_note", json.dumps({"path": "g", "text": "y"}), "denied"),
    ]
    policy = RulePolicy([Rule("write_note", Verdict.DENY, "frozen")])
    run_tool_calls(calls, ws.router, telemetry=ToolTelemetry(tracer_provider=provider), policy=policy)
    spans = {s.attributes["gen_ai.tool.call.id"]: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"ok", "err", "denied"}
    ok, err, denied = spans["ok"], spans["err"], spans["denied"]
    assert ok.name == "execute_tool read_note"
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "read_note"
    assert ok.attributes["toolroute.tool.kind"] == "function"
    assert ok.attributes["toolroute.tool.duration_ms"] >= 0
    assert ok.attributes["toolroute.tool.is_error"] is False
    assert ok.status.status_code is StatusCode.UNSET
    assert err.status.status_code is StatusCode.ERROR
    assert err.attributes["error.type"] == "ToolExecutionError"
    assert "RuntimeError: bad" in (err.status.description or "")
    assert denied.attributes["error.type"] == "ToolCallDenied"


def test_no_op_without_opentelemetry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import opentelemetry...` fail
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    telemetry = ToolTelemetry()
    assert telemetry.enabled is False
    ws = make_workspace(tmp_path)
    ws.path("f").write_text("still works")
    results = run_tool_calls([AgentToolCall("read_note", {"path": "f"})], ws.router, telemetry=telemetry)
    assert results[0].output == "still works"
