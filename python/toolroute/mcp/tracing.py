"""The trace context across the gateway: an upstream call runs in its caller's trace.

The gateway runs its sessions on a loop thread of its own, where the caller's context is not:
the `mcp` SDK's client span toward an upstream (`MCP send tools/call ...`, which puts the W3C
`traceparent` in the request's `params._meta`) then started a new trace. The caller's side takes
the current trace context (`current_trace`) and the loop's side makes the call inside it
(`in_trace`). Nothing is imported and nothing costs while OpenTelemetry is not in use (its module
not loaded, or no span recording).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def current_trace() -> Any:
    """The caller's OpenTelemetry context when a span is recording in it, else None."""
    otel = sys.modules.get("opentelemetry.trace")
    if otel is None:  # never imported: no one traces
        return None
    if not otel.get_current_span().is_recording():
        return None
    from opentelemetry import context

    return context.get_current()


@contextmanager
def in_trace(trace: Any) -> Iterator[None]:
    """Run the block in `trace` (from `current_trace`; None: as it is)."""
    if trace is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(trace)
    try:
        yield
    finally:
        context.detach(token)
