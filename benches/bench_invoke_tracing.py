"""The library's `invoke` with its OpenTelemetry span (issue 59: off costs nothing measurable, on
within reach), interleaved by benches/_interleave.py, which checks both sides give the same results.

Off: `invoke` (which looks for a tracer provider first) against `invoke` as it was before the look
(`untraced` below, the same steps), with OpenTelemetry never loaded, then loaded with no provider set.
On: a provider set (the SDK's, its spans dropped by a no-op processor: the span's own cost, not
an exporter's) against none, swapping the global provider between rounds.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from _interleave import compare

from toolroute import ToolRouter, function_tool
from toolroute.router import _as_text


@function_tool(name="add", read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ROUTER = ToolRouter()
ROUTER.register(add)
ARGS = json.dumps({"a": 2, "b": 40})


def untraced(name: str, argument: str) -> str:
    """`invoke` as it was before its look for a tracer provider (user id None)."""
    router = ROUTER
    if router.policy is None and router._initialized and not router._closed:
        hit = router._table.resolve(name, None)
        if hit is not None:
            return router._run(hit[1], argument, _as_text)
    return router._run(router.resolve(name), argument, _as_text)


def many(fn: Callable[[], Any]) -> Callable[[], list[Any]]:
    return lambda: [fn() for _ in range(5000)]  # one call is too short to time alone


def test_invoke_off_opentelemetry_not_loaded() -> None:
    loaded = "opentelemetry.trace" in sys.modules
    compare(
        f"tracing off ({'OpenTelemetry loaded by another module' if loaded else 'OpenTelemetry not loaded'}): "
        "invoke x5000",
        ("before", many(partial(untraced, "add", ARGS))),
        {"invoke": many(partial(ROUTER.invoke, "add", ARGS))},
        30,
    )


def test_invoke_off_opentelemetry_loaded_no_provider() -> None:
    import opentelemetry.trace

    assert opentelemetry.trace._TRACER_PROVIDER is None
    compare(
        "tracing off (OpenTelemetry loaded, no provider): invoke x5000",
        ("before", many(partial(untraced, "add", ARGS))),
        {"invoke": many(partial(ROUTER.invoke, "add", ARGS))},
        30,
    )


def test_invoke_on_a_span_per_call() -> None:
    import opentelemetry.trace as otel
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(SpanProcessor())  # the base class: each span ends, and is dropped

    def with_provider(set_to: Any) -> Callable[[], list[Any]]:
        calls = many(partial(ROUTER.invoke, "add", ARGS))

        def run() -> list[Any]:
            otel._TRACER_PROVIDER = set_to  # the global, swapped per round (set once in a real process)
            return calls()

        return run

    try:
        compare(
            "tracing on (SDK provider, spans dropped): invoke x5000",
            ("no provider", with_provider(None)),
            {"a span per call": with_provider(provider)},
            20,
        )
    finally:
        otel._TRACER_PROVIDER = None
