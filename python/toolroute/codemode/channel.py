"""The host's side of a program's tool channel: two pipes, one JSON object per line.

Program -> host: `{"id": n, "name": exposed name, "arguments": {...}}`. Host -> program: first
the catalogue, then `{"id": n, "ok": true, "text": result}` or `{"id": n, "ok": false, "kind":
..., "message": ...}`. The channel carries nothing else: a name outside the catalogue is refused
here, whatever the router could reach; a line that is not such a call, or longer than the cap,
ends the channel (the program's waiting calls then fail). Reads and writes poll with a short
tick so that `finish` never waits on a program that stopped reading or a process that kept the
pipe open.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolroute.cancellation import CancelToken, current_cancel_token, using_cancel_token
from toolroute.codemode.catalogue import Entry, for_program
from toolroute.codemode.inner import InnerReply

TICK = 0.1  # seconds between checks of `closing` while a read or write waits
READ_SIZE = 1 << 16
ARGUMENTS_SHOWN = 300  # characters of a call's arguments kept in the trace


class ChannelClosed(Exception):
    pass


class CallServer:
    """Serves one program's calls on up to `max_parallel` threads; at most `max_calls` run."""

    def __init__(
        self,
        catalogue: Sequence[Entry],
        run: Callable[[str, Entry | None, Mapping[str, Any]], InnerReply],
        *,
        max_parallel: int,
        max_calls: int,
        max_message_bytes: int,
    ) -> None:
        self._by_name = {e.tool.name: e for e in catalogue}
        self._catalogue_line = _line(for_program(catalogue))
        self._run = run
        self._max_calls = max_calls
        self._max_message = max_message_bytes
        self._pool = ThreadPoolExecutor(max_parallel, thread_name_prefix="toolroute-code-call")
        self._closing = threading.Event()
        self._write_lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._records_lock = threading.Lock()
        self._pending: set[int] = set()
        self.violation: str | None = None
        # Inner calls stop with the program, or with the code tool's own call.
        self._token = CancelToken()
        self._hooks = contextlib.ExitStack()
        outer = current_cancel_token()
        if outer is not None:
            self._hooks.enter_context(outer.on_cancel(self._token.cancel))
        self._to_program_r, self._to_program_w = os.pipe()
        self._from_program_r, self._from_program_w = os.pipe()
        os.set_blocking(self._to_program_w, False)
        self._reader: threading.Thread | None = None

    def child_fds(self) -> tuple[int, int]:
        """The program's ends: (read replies, write calls)."""
        return self._to_program_r, self._from_program_w

    def start(self) -> None:
        """Serve calls (the catalogue waits in the pipe for the program). The program's ends stay
        open here until `finish`: nothing relies on end-of-file, since a process the program left
        behind could hold them."""
        context = contextvars.copy_context()
        self._reader = threading.Thread(target=context.run, args=(self._serve,), name="toolroute-code-channel")
        self._reader.daemon = True
        self._reader.start()

    def finish(self, wait: float) -> list[dict[str, Any]]:
        """The program has ended: stop its inner calls, wait up to `wait` seconds for them, and
        return every call's record (a call still running is marked so)."""
        self._token.cancel()
        self._closing.set()
        if self._reader is not None:
            self._reader.join()  # it looks at `closing` every TICK, and blocks on nothing else
        deadline = time.monotonic() + wait
        self._pool.shutdown(wait=False, cancel_futures=True)
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.01)
        self._close()
        with self._records_lock:
            records = [dict(r) for r in self._records]
        for record in records:
            record.setdefault("outcome", "abandoned")
        return records

    def _close(self) -> None:
        self._hooks.close()
        with self._write_lock:
            for fd in (self._to_program_r, self._to_program_w, self._from_program_r, self._from_program_w):
                if fd >= 0:
                    os.close(fd)
            self._to_program_r = self._to_program_w = self._from_program_r = self._from_program_w = -1

    # ---- serving --------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            self._write(self._catalogue_line)
            buffer = b""
            while True:
                chunk = self._read()
                if not chunk:
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._dispatch(line)
                if len(buffer) > self._max_message:
                    raise ChannelClosed(f"a message longer than {self._max_message} bytes")
        except ChannelClosed as exc:
            if str(exc):
                self.violation = str(exc)
            self._hang_up()
        except OSError:
            self._hang_up()  # the program is gone

    def _hang_up(self) -> None:
        """Stop serving, and close the host's ends now: the program's waiting calls see the end
        of its replies (and fail) instead of waiting for its time limit."""
        self._closing.set()
        with self._write_lock:
            for fd in (self._to_program_w, self._from_program_r):
                if fd >= 0:
                    os.close(fd)
            self._to_program_w = self._from_program_r = -1

    def _read(self) -> bytes:
        while not self._closing.is_set():  # only this thread closes the descriptor it reads
            ready, _, _ = select.select([self._from_program_r], [], [], TICK)
            if ready:
                return os.read(self._from_program_r, READ_SIZE)
        return b""

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        with self._write_lock:
            while view:
                if self._closing.is_set() or self._to_program_w < 0:
                    raise ChannelClosed("")
                _, ready, _ = select.select([], [self._to_program_w], [], TICK)
                if ready:
                    try:
                        view = view[os.write(self._to_program_w, view) :]
                    except BlockingIOError:
                        continue

    def _dispatch(self, line: bytes) -> None:
        if len(line) > self._max_message:
            raise ChannelClosed(f"a message longer than {self._max_message} bytes")
        try:
            message = json.loads(line)
        except ValueError:
            raise ChannelClosed("a line that is not JSON") from None
        ident = message.get("id") if isinstance(message, dict) else None
        name = message.get("name") if isinstance(message, dict) else None
        arguments = message.get("arguments") if isinstance(message, dict) else None
        if type(ident) is not int or not isinstance(name, str) or not isinstance(arguments, dict):
            raise ChannelClosed("a message that is not a call ({id, name, arguments})")
        with self._records_lock:
            index = len(self._records)
            over = index >= self._max_calls
            if not over:
                self._records.append({"name": name, "arguments": _shown(arguments)})
                self._pending.add(index)
        if over:
            self._reply(ident, InnerReply(False, f"the program made more than {self._max_calls} calls", "TooManyCalls"))
            return
        context = contextvars.copy_context()
        self._pool.submit(context.run, self._call, index, ident, name, arguments)

    def _call(self, index: int, ident: int, name: str, arguments: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            if self._token.cancelled:
                reply = InnerReply(False, "the program ended", "Cancelled")
            else:
                with using_cancel_token(self._token):  # None: outside the catalogue, refused
                    reply = self._run(name, self._by_name.get(name), arguments)
            outcome: dict[str, Any] = {"outcome": "ok" if reply.ok else "error"}
            if not reply.ok:
                outcome["errorKind"] = reply.kind
            with self._records_lock:
                self._records[index].update(outcome, durationSeconds=round(time.perf_counter() - started, 4))
            with contextlib.suppress(ChannelClosed, OSError):  # the program is gone: nobody to answer
                self._reply(ident, reply)
        finally:
            with self._records_lock:
                self._pending.discard(index)

    def _reply(self, ident: int, reply: InnerReply) -> None:
        if reply.ok:
            message: dict[str, Any] = {"id": ident, "ok": True, "text": reply.text}
        else:
            message = {"id": ident, "ok": False, "kind": reply.kind or "ToolError", "message": reply.text}
        self._write(_line(message))


def _line(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode()


def _shown(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= ARGUMENTS_SHOWN else text[:ARGUMENTS_SHOWN] + "…"
