"""IoCapture: per call, the input, the output string and the trace (AI4J's TOOL node records)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from toolroute.agent.types import AgentToolCall, AgentToolResult


class ResultSink(Protocol):
    """Receives every finished call. A sink with `blocking = True` (file I/O) is fed from a
    worker thread so it never stalls the event loop."""

    def record(self, call: AgentToolCall, result: AgentToolResult) -> None: ...


@dataclass(frozen=True)
class IoRecord:
    call: AgentToolCall
    result: AgentToolResult
    recorded_at: float  # time.time()

    @property
    def input(self) -> AgentToolCall:
        return self.call

    @property
    def output(self) -> str:
        return self.result.output

    @property
    def trace(self) -> Any:
        return self.result.trace


class IoCapture:
    """An in-memory `ResultSink`, safe to feed from parallel calls; records in completion order."""

    blocking = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[IoRecord] = []

    def record(self, call: AgentToolCall, result: AgentToolResult) -> None:
        entry = IoRecord(call, result, time.time())
        with self._lock:
            self._records.append(entry)

    @property
    def records(self) -> list[IoRecord]:
        with self._lock:
            return list(self._records)

    def for_call(self, call_id: str) -> IoRecord | None:
        return next((r for r in self.records if r.call.call_id == call_id), None)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def __iter__(self) -> Iterator[IoRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)
