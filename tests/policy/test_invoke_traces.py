"""OpenTelemetry spans of the library's `invoke` (issue 59), set up from the `OTEL_*` variables
alone, exported over OTLP/HTTP to a local receiver that decodes them with `opentelemetry-proto`:
an `execute_tool` span per call, a failure marked, and an upstream MCP call inside it carrying
the same trace in its `traceparent`. Without the variables no tracer provider is set up.
Each program runs in a process of its own (the tracer provider is global to a process)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _mcp_helpers import script_stdio
from _serve_helpers import tool_env
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROGRAM = """
import asyncio, json, sys
from toolroute import ToolRouter
from toolroute.mcp import McpGateway
import _serve_tools

with ToolRouter(gateway=McpGateway({"args": json.loads(sys.argv[1])})) as router:
    router.register(_serve_tools.echo)
    router.register(_serve_tools.fail)
    print(router.invoke("echo", {"text": "hi"}))
    try:
        router.invoke("fail", {"reason": "on purpose"})
    except Exception as exc:
        print(type(exc).__name__)
    print(asyncio.run(router.ainvoke("echo", {"text": "async"})))
    print(router.invoke("request_meta", {}))
otel = sys.modules.get("opentelemetry.trace")  # the `mcp` SDK loads it, for its own spans
print("provider set:", getattr(otel, "_TRACER_PROVIDER", None) is not None)
"""


class _Receiver(BaseHTTPRequestHandler):
    spans: list[Any] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.spans.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Any]]]:
    spans: list[Any] = []
    handler = type("Receiver", (_Receiver,), {"spans": spans})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", spans
    finally:
        server.shutdown()


def run(tmp_path: Path, **env: str) -> list[str]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    upstream = json.dumps(script_stdio("args_server.py"))
    done = subprocess.run(
        [sys.executable, str(script), upstream], env=tool_env(**env), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def attributes(span: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in span.attributes}


def test_each_invoke_is_an_execute_tool_span_and_an_upstream_call_stays_in_its_trace(
    tmp_path: Path, receiver: tuple[str, list[Any]]
) -> None:
    url, spans = receiver
    # The program exits once done: the SDK flushes its batch at exit, before the receiver is read.
    out = run(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_SERVICE_NAME="library-under-test")
    assert out[:3] == ["hi", "ToolExecutionError", "async"] and out[-1] == "provider set: True"
    meta = json.loads(out[3])
    ours = {s.name: s for s in spans if s.name.startswith("execute_tool")}
    assert set(ours) == {"execute_tool echo", "execute_tool fail", "execute_tool request_meta"}
    echoes = [s for s in spans if s.name == "execute_tool echo"]
    assert len(echoes) == 2  # invoke and ainvoke
    assert attributes(echoes[0]) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo"}
    assert echoes[0].status.code == 0  # unset: no failure
    fail = ours["execute_tool fail"]
    assert fail.status.code == 2 and attributes(fail)["error.type"] == "ToolExecutionError"
    # The upstream got a traceparent in the trace of the invoke that called it.
    upstream = ours["execute_tool request_meta"]
    _, trace_id, parent_id, _ = meta["traceparent"].split("-")
    assert trace_id == upstream.trace_id.hex()
    client_span = next(s for s in spans if s.span_id.hex() == parent_id)
    assert client_span.parent_span_id == upstream.span_id  # the SDK's client span, the invoke's child


def test_without_the_variables_no_provider_is_set_and_no_trace_passes_on(tmp_path: Path) -> None:
    out = run(tmp_path)
    assert out[:3] == ["hi", "ToolExecutionError", "async"] and out[-1] == "provider set: False"
    assert "traceparent" not in json.loads(out[3])
