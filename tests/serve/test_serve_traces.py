"""OpenTelemetry traces of a real `toolroute serve` (issue 59), set up from the `OTEL_*`
variables alone and exported over OTLP/HTTP to a local receiver that decodes them with
`opentelemetry-proto`: GenAI `execute_tool` spans, failures marked, a client's `traceparent`
honoured."""

from __future__ import annotations

import json
import secrets
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from _mcp_helpers import script_stdio, wait_until
from _serve_helpers import TOOLS_MODULE, ServedProcess, outside_tmp, served_http, tool_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from toolroute.serve.store import UserStore

SPANS: list[Any] = []


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            SPANS.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ServedProcess, str]]:
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    tmp = outside_tmp()
    try:
        store_url = f"sqlite:///{tmp / 'users.db'}"
        with UserStore(store_url) as store:
            store.add_user("ann")
            key = store.add_key("ann")
        (tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"args": script_stdio("args_server.py")}}))
        env = tool_env(
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.server_address[1]}",
            OTEL_BSP_SCHEDULE_DELAY="50",
            OTEL_SERVICE_NAME="toolroute-under-test",
        )
        args = [
            *("--modules", TOOLS_MODULE, "--functions", "echo,fail", "--api-keys", "--store", store_url),
            *("--mcp-config", str(tmp / "mcp.json"), "--mcp-servers", "args"),
            *("--workspace-template", str(tmp / "ws" / "{user}")),
        ]
        with served_http(args, env) as server:
            yield server, key
    finally:
        receiver.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def attributes(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


async def _calls(url: str, key: str, traceparent: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        assert not (await client.call_tool("echo", {"text": "hi"})).is_error
        assert (await client.call_tool("fail", {"reason": "broken on purpose"})).is_error
        assert not (await client.call_tool("echo", {"text": "child"}, meta={"traceparent": traceparent})).is_error


def test_each_call_is_an_execute_tool_span_and_a_clients_traceparent_is_its_parent(
    served: tuple[ServedProcess, str],
) -> None:
    server, key = served
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    anyio.run(_calls, server.url, key, f"00-{trace_id}-{parent_id}-01")
    # (The gateway's own sessions with the upstream export spans too: wait for the calls' ones.)
    assert wait_until(lambda: sum(s.name.startswith("execute_tool ") for s in SPANS) >= 3, timeout=30)
    by_name: dict[str, list[Any]] = {}
    for span in SPANS:
        by_name.setdefault(span.name, []).append(span)
    echo, fail = by_name["execute_tool echo"], by_name["execute_tool fail"]
    assert len(echo) == 2 and len(fail) == 1
    child = next(s for s in echo if s.trace_id.hex() == trace_id)
    (plain,) = [s for s in echo if s is not child]
    first = attributes(plain)
    assert first["gen_ai.operation.name"] == "execute_tool" and first["gen_ai.tool.name"] == "echo"
    assert first["gen_ai.tool.call.id"]  # the JSON-RPC request id
    failed = attributes(fail[0])
    assert failed["error.type"] == "failed" and fail[0].status.code == 2  # STATUS_CODE_ERROR
    assert plain.status.code != 2
    # The call that carried a traceparent is its child; the others start traces of their own.
    assert child.parent_span_id.hex() == parent_id
    assert plain.trace_id.hex() != trace_id and fail[0].trace_id.hex() != trace_id


async def _upstream_meta(url: str, key: str, traceparent: str) -> str:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool("request_meta", {}, meta={"traceparent": traceparent})
        assert not result.is_error
        return "".join(getattr(c, "text", "") for c in result.content)


def test_the_upstream_gets_a_traceparent_of_the_same_trace_from_a_client_span(
    served: tuple[ServedProcess, str],
) -> None:
    server, key = served
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    received = json.loads(anyio.run(_upstream_meta, server.url, key, f"00-{trace_id}-{parent_id}-01"))
    _, upstream_trace, upstream_parent, _ = received["traceparent"].split("-")
    assert upstream_trace == trace_id  # the context survived every hop inside toolroute
    assert wait_until(
        lambda: (
            {s.span_id.hex() for s in SPANS} >= {upstream_parent}
            and any(s.name == "execute_tool request_meta" for s in SPANS)
        ),
        timeout=30,
    )
    client = next(s for s in SPANS if s.span_id.hex() == upstream_parent)
    # The mcp SDK's own client span, now inside the caller's trace.
    assert client.name == "MCP send tools/call request_meta" and client.kind == 3  # SPAN_KIND_CLIENT
    served_span = next(s for s in SPANS if s.name == "execute_tool request_meta")
    assert client.parent_span_id == served_span.span_id and served_span.parent_span_id.hex() == parent_id
