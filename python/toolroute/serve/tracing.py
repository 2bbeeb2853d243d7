"""OpenTelemetry traces of served mode, set up from the standard `OTEL_*` variables.

With the SDK and the OTLP/HTTP exporter installed (`pip install 'toolroute[traces]'`) and an OTLP
endpoint named (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the
exporter reads its other variables itself), each call gets an `execute_tool {tool}` span per the
GenAI semantic conventions (`agent/telemetry.py`), the child of the `traceparent` a client sent
in the request's `params._meta`. Without the packages or the variables nothing is set up, and a
call pays one `is None` check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from toolroute._tracing import provider_from_environment
from toolroute.agent.telemetry import Finish, ToolTelemetry
from toolroute.agent.types import AgentToolCall, AgentToolResult


class ServedTracing:
    """The tracer provider made from the environment, and spans per served call."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.telemetry = ToolTelemetry(provider)
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._propagator = TraceContextTextMapPropagator()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> ServedTracing | None:
        # Made already when the router was (the library sets it up from the same variables).
        provider = provider_from_environment(environ)
        if provider is None:
            return None
        return cls(provider)

    @contextmanager
    def span(
        self, name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None, call_id: str
    ) -> Iterator[Finish]:
        """An `execute_tool` span around one call, the child of the client's `traceparent`."""
        carrier = {k: v for k, v in (meta or {}).items() if k in ("traceparent", "tracestate") and isinstance(v, str)}
        parent = self._propagator.extract(carrier) if carrier else None
        from opentelemetry import context

        token = context.attach(parent) if parent is not None else None
        try:
            with self.telemetry.span(AgentToolCall(name, dict(arguments or {}), call_id), "served") as finish:
                yield finish
        finally:
            if token is not None:
                context.detach(token)

    def close(self) -> None:
        self.provider.shutdown()  # flushes what the batch still holds


def finished(name: str, call_id: str, result: Any, kind: str, seconds: float) -> AgentToolResult:
    """What a span records of a served call: its outcome kind as `error.type` when it failed."""
    text = "".join(getattr(c, "text", "") for c in getattr(result, "content", None) or ())
    failed = result is None or bool(result.is_error)
    return AgentToolResult(name, call_id, text, failed, duration=seconds, error_type=kind if failed else None)
