"""Prometheus metrics of served mode (`toolroute serve --metrics HOST:PORT`, `prometheus-client`).

Labels never carry a user id or an argument value: a call's `tool` label is the exposed name of a
tool the caller was served, `user_mcp` for any user's own server's tool (their names are the
users'), and `_unknown` for a name nobody was served (a client could otherwise grow the label set
without bound). Live figures (upstreams up, users held) are read at scrape time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from toolroute.errors import ToolArgumentError

if TYPE_CHECKING:
    from toolroute.serve.tenants import Tenancy
    from toolroute.types import Tool

OUTCOMES = ("ok", "bad_arguments", "not_found", "refused", "needs_approval", "failed", "cancelled")
UNKNOWN = "_unknown"


def tool_label(name: str, tool: Tool | None) -> str:
    if tool is None:
        return UNKNOWN
    return "user_mcp" if tool.kind.key == "user_mcp" else name


def outcome_label(kind: str) -> str:
    """A call outcome kind (`OutcomeKind` values) as the metric's `outcome`."""
    return "needs_approval" if kind == "approval_needed" else kind if kind in OUTCOMES else "failed"


def parse_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ToolArgumentError(f"--metrics wants HOST:PORT (e.g. 127.0.0.1:9464), not {value!r}")
    return host.strip("[]"), int(port)


class _Live:
    """The figures read when Prometheus scrapes: each global upstream up or not, users held."""

    def __init__(self, tenancy: Tenancy) -> None:
        self.tenancy = tenancy

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily(
            "toolroute_upstream_up", "1 when the upstream MCP server is connected", labels=["server"]
        )
        gateway = self.tenancy.router.gateway
        status: Callable[[], dict[str, bool]] | None = getattr(gateway, "upstream_status", None)
        for server, connected in (status() if status is not None else {}).items():
            up.add_metric([server], 1.0 if connected else 0.0)
        yield up
        yield GaugeMetricFamily(
            "toolroute_active_sessions",
            "users whose session state (tools, workspace, own servers) the server holds now",
            value=float(self.tenancy.present()),
        )
        yield from _spawns()


def _spawns() -> Iterator[Any]:
    """Commands started (bash, background processes), by sandbox: counts and start latency."""
    from prometheus_client.core import CounterMetricFamily

    from toolroute.builtins._process.pump import SPAWNS

    started = CounterMetricFamily(
        "toolroute_sandbox_spawns", "commands started, by sandbox and result", labels=["sandbox", "result"]
    )
    seconds = CounterMetricFamily(
        "toolroute_sandbox_spawn_seconds",
        "time spent starting commands (to the sandbox up), by sandbox",
        labels=["sandbox"],
    )
    for sandbox, (ok, failed, spent) in sorted(SPAWNS.snapshot().items()):
        started.add_metric([sandbox, "started"], float(ok))
        started.add_metric([sandbox, "failed"], float(failed))
        seconds.add_metric([sandbox], spent)
    yield started
    yield seconds


class Metrics:
    """The registry of one server and its counters."""

    def __init__(self, tenancy: Tenancy) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram, PlatformCollector, ProcessCollector

        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.calls = Counter(
            "toolroute_tool_calls", "tool calls by outcome", ["tool", "outcome"], registry=self.registry
        )
        self.duration = Histogram(
            "toolroute_tool_call_duration_seconds", "tool call duration", ["tool"], registry=self.registry
        )
        self.registry.register(_Live(tenancy))
        self._server: Any = None
        self._lock = threading.Lock()

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        self.calls.labels(tool, outcome).inc()
        self.duration.labels(tool).observe(seconds)

    def start(self, host: str, port: int) -> None:
        from prometheus_client import start_http_server

        try:
            self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ToolArgumentError(f"--metrics: cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server is not None else 0

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None
