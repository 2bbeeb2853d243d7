"""Real function tools for the agent-layer tests: they read and write files in a tmp dir and
count how many of them run at the same moment (overlap is measured, never inferred from time)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from toolroute import ToolOutput, ToolRouter, function_tool
from toolroute.agent import AgentToolCall

# Generous deadlock guards for barriers: a broken barrier fails the test, it never measures speed.
BARRIER_TIMEOUT = 30.0


def call(name: str, call_id: str = "", **args: object) -> AgentToolCall:
    """One tool call as the model sends it: `args` become its JSON arguments string."""
    return AgentToolCall(name, json.dumps(args), call_id)


class Gauge:
    """How many tool bodies are running right now, and the most that ever ran at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current = 0
        self.peak = 0
        self.entered = 0

    @contextmanager
    def running(self) -> Iterator[int]:
        """Yields how many were running when this one entered (itself included)."""
        with self._lock:
            self.current += 1
            self.entered += 1
            self.peak = max(self.peak, self.current)
            now = self.current
        try:
            yield now
        finally:
            with self._lock:
                self.current -= 1


@dataclass
class Workspace:
    """A router with file tools over `root`; `log` records every write in execution order."""

    root: Path
    router: ToolRouter = field(default_factory=ToolRouter)
    gauge: Gauge = field(default_factory=Gauge)
    barrier: threading.Barrier | None = None
    release: threading.Event = field(default_factory=threading.Event)
    write_log: list[str] = field(default_factory=list)
    concurrent_at_write: list[int] = field(default_factory=list)

    def path(self, name: str) -> Path:
        return self.root / name


def make_workspace(root: Path, barrier_parties: int | None = None) -> Workspace:
    ws = Workspace(root)
    if barrier_parties:
        ws.barrier = threading.Barrier(barrier_parties, timeout=BARRIER_TIMEOUT)

    @function_tool(name="write_note", description="Write text to a file (side-effecting).")
    def write_note(path: str, text: str) -> str:
        with ws.gauge.running() as now:
            ws.concurrent_at_write.append(now)
            ws.path(path).write_text(text, encoding="utf-8")
            ws.write_log.append(path)
        return f"wrote {len(text)} chars to {path}"

    @function_tool(name="read_note", read_only=True, idempotent=True)
    def read_note(path: str) -> str:
        with ws.gauge.running():
            return ws.path(path).read_text(encoding="utf-8")

    @function_tool(name="meeting_read", read_only=True)
    def meeting_read(path: str) -> ToolOutput:
        """Reads a file, but only once `barrier` parties are inside at the same time."""
        with ws.gauge.running():
            assert ws.barrier is not None
            ws.barrier.wait()
            text = ws.path(path).read_text(encoding="utf-8")
        return ToolOutput(text, trace={"path": path, "chars": len(text)})

    @function_tool(name="undeclared_read")
    def undeclared_read(path: str) -> str:
        """Only reads, but never said so: must be scheduled as side-effecting."""
        with ws.gauge.running():
            return ws.path(path).read_text(encoding="utf-8")

    @function_tool(name="explode")
    def explode(message: str) -> str:
        raise RuntimeError(message)

    @function_tool(name="hang", read_only=True)
    def hang(label: str) -> str:
        """Blocks until the test releases it (for timeouts)."""
        ws.release.wait(BARRIER_TIMEOUT)
        return f"released {label}"

    @function_tool(name="hang_write")
    def hang_write(label: str) -> str:
        ws.release.wait(BARRIER_TIMEOUT)
        return f"released {label}"

    for tool in (write_note, read_note, meeting_read, undeclared_read, explode, hang, hang_write):
        ws.router.register(tool)
    return ws
