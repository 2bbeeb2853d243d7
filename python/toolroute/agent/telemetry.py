"""OpenTelemetry spans per tool call, or nothing at all when `opentelemetry-api` is absent.

Attribute names follow the GenAI semantic conventions (`gen_ai.operation.name = execute_tool`,
`gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type`) plus toolroute's own `toolroute.tool.*`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from toolroute.agent.types import AgentToolCall, AgentToolResult

Finish = Callable[[AgentToolResult], None]
TRACER_NAME = "toolroute.agent"


def _load_otel_trace() -> Any:
    try:
        return importlib.import_module("opentelemetry.trace")
    except ImportError:
        return None


class ToolTelemetry:
    """`with telemetry.span(call, kind) as finish: ...; finish(result)`."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self._explicit_provider = tracer_provider is not None
        self._otel = _load_otel_trace()
        self._tracer = (
            None if self._otel is None else self._otel.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        )

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def _recording(self) -> bool:
        """False while no SDK is configured (the global provider is still the API's proxy):
        skipping the no-op span saves tens of microseconds per call."""
        if self._tracer is None:
            return False
        return self._explicit_provider or not isinstance(
            self._otel.get_tracer_provider(), self._otel.ProxyTracerProvider
        )

    def span(self, call: AgentToolCall, kind: str | None = None) -> AbstractContextManager[Finish]:
        """A span around one call; `finish(result)` records the outcome."""
        return self._span(call, kind) if self._recording() else _NO_SPAN

    @contextmanager
    def _span(self, call: AgentToolCall, kind: str | None) -> Iterator[Finish]:
        assert self._tracer is not None
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "toolroute.tool.kind": kind or "unknown",
        }
        otel = self._otel
        with self._tracer.start_as_current_span(
            f"execute_tool {call.name}", kind=otel.SpanKind.INTERNAL, attributes=attributes
        ) as span:

            def finish(result: AgentToolResult) -> None:
                span.set_attribute("toolroute.tool.duration_ms", result.duration * 1000.0)
                span.set_attribute("toolroute.tool.attempts", result.attempts)
                span.set_attribute("toolroute.tool.is_error", result.is_error)
                if result.is_error:
                    span.set_attribute("error.type", result.error_type or "error")
                    span.set_status(otel.Status(otel.StatusCode.ERROR, result.output[:500]))

            yield finish


def _ignore(result: AgentToolResult) -> None:
    return None


_NO_SPAN = nullcontext(_ignore)  # reusable: entering a nullcontext has no state
