"""Traces as JSON Lines: one record per finished call, appended and fsynced, so a crash loses at
most the call that was running; and a replay executor that answers calls from such a file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolroute.agent.executor import TraceSlot
from toolroute.agent.types import REPLAY_MISS, AgentToolCall, AgentToolResult
from toolroute.types import ToolTraits

FORMAT_VERSION = 1
log = logging.getLogger("toolroute.agent")


@dataclass(frozen=True)
class TraceRecord:
    run_id: str
    seq: int
    recorded_at: float
    call: AgentToolCall
    result: AgentToolResult

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": FORMAT_VERSION,
                "run_id": self.run_id,
                "seq": self.seq,
                "recorded_at": self.recorded_at,
                "call": self.call.to_dict(),
                "result": self.result.to_dict(),
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, line: str) -> TraceRecord:
        data = json.loads(line)
        if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION:
            raise ValueError(f"not a toolroute trace record (format {FORMAT_VERSION})")
        return cls(
            run_id=data["run_id"],
            seq=int(data["seq"]),
            recorded_at=float(data["recorded_at"]),
            call=AgentToolCall.from_dict(data["call"]),
            result=AgentToolResult.from_dict(data["result"]),
        )


class JsonlAppender:
    """Appends whole lines to a file: O_APPEND, one write per line, fsync, thread-safe.

    Reopening a file whose last line was cut by a crash first terminates that line, so the
    torn record stays one unreadable line instead of corrupting the next one.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._seq = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Private: what it records (a trace's arguments and results, served mode's audit of who
        # called what) is nobody else's to read.
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if _ends_mid_line(self.path):
            os.write(self._fd, b"\n")

    def append(self, line: str) -> None:
        """Write `line` plus a newline; `line` must not contain one."""
        with self._lock:
            self._write(line)

    def append_numbered(self, make_line: Callable[[int], str]) -> None:
        """Write the line built from the next sequence number (1, 2, ...), numbered under the lock."""
        with self._lock:
            self._seq += 1
            self._write(make_line(self._seq))

    def _write(self, line: str) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        data = (line + "\n").encode("utf-8")
        written = os.write(self._fd, data)
        while written < len(data):  # short writes are rare but legal
            written += os.write(self._fd, data[written:])
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class JsonlTraceStore:
    """A `ResultSink` appending one line per call to `path` (see `JsonlAppender`)."""

    blocking = True

    def __init__(self, path: str | os.PathLike[str], *, run_id: str | None = None, fsync: bool = True) -> None:
        self.run_id = run_id or uuid.uuid4().hex
        self._out = JsonlAppender(path, fsync=fsync)
        self.path = self._out.path
        self.fsync = fsync

    def record(self, call: AgentToolCall, result: AgentToolResult) -> None:
        self._out.append_numbered(lambda seq: TraceRecord(self.run_id, seq, time.time(), call, result).to_json())

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> JsonlTraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_mid_line(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def read_trace(path: str | os.PathLike[str], *, strict: bool = False) -> list[TraceRecord]:
    """Every record of a trace file, in file order. Unreadable lines (a record torn by a crash)
    are skipped with a warning, or raise `ValueError` when `strict`."""
    records = []
    with Path(path).open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(TraceRecord.from_json(line))
            except (ValueError, KeyError, TypeError) as exc:
                if strict:
                    raise ValueError(f"{path}:{number}: unreadable trace record: {exc}") from None
                log.warning("%s:%d: skipping unreadable trace record (%s)", path, number, exc)
    return records


def load_results(path: str | os.PathLike[str], *, run_id: str | None = None) -> list[AgentToolResult]:
    """The recorded results (of one run, if given), in the order they finished."""
    return [r.result for r in read_trace(path) if run_id is None or r.run_id == run_id]


def _arguments_key(call: AgentToolCall) -> str:
    args = call.parsed_arguments()
    return call.arguments_text() if args is None else json.dumps(args, sort_keys=True, ensure_ascii=False)


class ReplayExecutor:
    """Answers calls from a recorded trace and never executes a tool.

    A call is matched by its call id (same name), else by name and arguments (identical calls get
    the recorded answers in recorded order); each record answers once. A miss is an `is_error`
    result, or goes to `fallback` when one is given.
    """

    def __init__(
        self,
        records: Iterable[TraceRecord] | str | os.PathLike[str],
        *,
        fallback: Any = None,
    ) -> None:
        if isinstance(records, (str, os.PathLike)):
            records = read_trace(records)
        self._records = list(records)
        self._used = [False] * len(self._records)
        self._by_id: dict[tuple[str, str], deque[int]] = defaultdict(deque)
        self._by_args: dict[tuple[str, str], deque[int]] = defaultdict(deque)
        for i, rec in enumerate(self._records):
            self._by_id[(rec.call.name, rec.call.call_id)].append(i)
            self._by_args[(rec.call.name, _arguments_key(rec.call))].append(i)
        self._lock = threading.Lock()
        self._trace = TraceSlot(f"replay_{id(self)}")
        self.fallback = fallback

    def _take(self, queue: deque[int]) -> int | None:
        while queue:
            i = queue.popleft()
            if not self._used[i]:
                self._used[i] = True
                return i
        return None

    def _lookup(self, call: AgentToolCall) -> TraceRecord | None:
        with self._lock:
            i = self._take(self._by_id.get((call.name, call.call_id), deque())) if call.call_id else None
            if i is None:
                i = self._take(self._by_args.get((call.name, _arguments_key(call)), deque()))
            return None if i is None else self._records[i]

    def _answer(self, call: AgentToolCall, record: TraceRecord | None) -> AgentToolResult | None:
        if record is None:
            if self.fallback is not None:
                return None
            result = AgentToolResult.failure(
                call,
                REPLAY_MISS,
                f"no recorded result for tool {call.name!r} with these arguments (replay mode never executes tools)",
            )
        else:
            metadata = {**record.result.metadata, "replayed": True, "recorded_run_id": record.run_id}
            result = replace(record.result, call_id=call.call_id, metadata=metadata)
        self._trace.set(result.trace)
        return result

    def execute(self, call: AgentToolCall) -> AgentToolResult:
        answer = self._answer(call, self._lookup(call))
        return answer if answer is not None else self.fallback.execute(call)

    async def aexecute(self, call: AgentToolCall) -> AgentToolResult:
        answer = self._answer(call, self._lookup(call))
        return answer if answer is not None else await self.fallback.aexecute(call)

    def last_trace(self) -> Any:
        return self._trace.get()

    def blocking(self, name: str) -> bool:
        """Answers are instant unless a live fallback may run the call."""
        return self.fallback is None

    def traits(self, name: str) -> ToolTraits:
        """Schedule as recorded; never retry (a retry would only consume another record)."""
        for rec in self._records:
            if rec.call.name == name:
                return ToolTraits(read_only=bool(rec.result.metadata.get("read_only")), idempotent=False)
        return ToolTraits()

    @property
    def unused(self) -> list[TraceRecord]:
        """Recorded calls nobody asked for (the replayed run diverged)."""
        with self._lock:
            return [r for r, used in zip(self._records, self._used, strict=False) if not used]
