"""OpenTelemetry spans around the library's `invoke`, and the SDK set up from `OTEL_*` (issue 59).

A span per call (`execute_tool {tool}`, GenAI semantic conventions: `gen_ai.operation.name`,
`gen_ai.tool.name`, error status and `error.type` on failure) goes to the global tracer provider
once one is set: by the host, or by toolroute itself from the standard variables when the SDK and
the OTLP/HTTP exporter are installed (`pip install 'toolroute[traces]'`, an endpoint in
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). Until then a call pays a
dictionary lookup (`opentelemetry.trace` never imported) or one attribute read (imported, no
provider set): nothing is imported and nothing else runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

log = logging.getLogger("toolroute.tracing")
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
OTEL_TRACE = "opentelemetry.trace"

R = TypeVar("R")

_lock = threading.Lock()
_tracer: tuple[Any, Any] | None = None  # (provider, its tracer for toolroute's spans)
_warned = False


def tracer(otel: Any) -> Any | None:
    """The tracer for a call's span, or None while no provider is set (`otel`: the loaded
    `opentelemetry.trace` module)."""
    global _tracer
    provider = getattr(otel, "_TRACER_PROVIDER", None)  # the global one, once set (None before)
    if provider is None:
        return None
    held = _tracer
    if held is not None and held[0] is provider:
        return held[1]
    made = provider.get_tracer("toolroute")
    _tracer = (provider, made)
    return made


def traced(tracer: Any, name: str, run: Callable[[], R]) -> R:
    """`run()` inside an `execute_tool {name}` span; a failure marks it with `error.type`."""
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    with tracer.start_as_current_span(
        f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes, record_exception=False
    ) as span:
        try:
            return run()
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            raise


async def atraced(tracer: Any, name: str, run: Callable[[], Any]) -> Any:
    """`traced` for a coroutine function."""
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    with tracer.start_as_current_span(
        f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes, record_exception=False
    ) as span:
        try:
            return await run()
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            raise


def provider_from_environment(environ: Mapping[str, str] = os.environ) -> Any | None:
    """The global tracer provider, set up from the standard variables if none is set yet (the
    host's own wins); None without the variables or the packages, or with OTEL_SDK_DISABLED."""
    if not any(environ.get(name) for name in ENDPOINT_VARIABLES) or environ.get("OTEL_SDK_DISABLED") == "true":
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        global _warned
        if not _warned:  # once: every router made asks
            _warned = True
            log.warning("OTEL_EXPORTER_OTLP_* is set, the exporter is not installed: pip install 'toolroute[traces]'")
        return None
    with _lock:
        held = getattr(trace, "_TRACER_PROVIDER", None)
        if held is not None:
            return held
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create.
        resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "toolroute"})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        # The global provider: the gateway's client spans toward upstreams (mcp/tracing.py) use it.
        trace.set_tracer_provider(provider)
        return provider
