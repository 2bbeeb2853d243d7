"""Background processes: the table of one router, owned per (workspace, user), never leaked.

Each process has a daemon thread running its `Pump`, so output is drained into ring buffers and
the shell is reaped the moment it exits. The table ends every process it holds when it is closed,
when it is garbage-collected, and at interpreter exit (`weakref.finalize` keeps a weak registry of
live tables and runs at exit), so no orphan or zombie outlives it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import secrets
import select
import signal
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from toolroute.builtins._process import hostsignals
from toolroute.builtins._process.buffers import Chunk, RingBuffer, read_chunk
from toolroute.builtins._process.group import signal_group
from toolroute.builtins._process.pump import (
    DRAIN_WAIT,
    KILL_WAIT,
    TERM_GRACE,
    CommandSpec,
    Outcome,
    Pump,
    close_pipes,
    spawn,
)
from toolroute.builtins._process.sandbox import PrivateTmp

Owner = tuple[str, str | None]  # (canonical workspace, user id)

STOP_WAIT = TERM_GRACE + KILL_WAIT + DRAIN_WAIT + 1.0
STDIN_WAIT = 5.0  # how long `write` waits for a process that does not read its stdin
RETAIN_FINISHED = 32  # ended processes kept per owner for status/logs, oldest dropped first
# What background processes' output may hold in all, per table (a served server's: every
# tenant's): a start that would pass it is refused; ended processes' output goes first.
TABLE_BUFFER_BYTES = 256 * 1024 * 1024

STOPPED_ON_REQUEST = "it was stopped on request (action=stop)"
ROUTER_CLOSED = "its router was closed, or the server is shutting down"
HOST_ENDING = "the host received a signal to end (SIGTERM or SIGHUP) and ended its commands first"


# A random tag of this server process, embedded in every process id it hands out. Behind a
# balancer a user's ids are only meaningful on the replica that started them; an id whose tag names
# another instance was started by a server (or an earlier life of this one) that no longer serves
# the caller, and its process is lost with it (see LostProcess).
INSTANCE = secrets.token_hex(4)
_ID = re.compile(r"proc_([0-9a-f]{8})_[0-9a-f]{32}")


def new_process_id() -> str:
    return f"proc_{INSTANCE}_{uuid.uuid4().hex}"


def instance_of(process_id: str) -> str | None:
    """The instance tag of a well-formed process id (None for anything else)."""
    match = _ID.fullmatch(process_id)
    return None if match is None else match.group(1)


class UnknownProcess(LookupError):
    pass


class LostProcess(UnknownProcess):
    """The id names a process started by another server instance: not this one's to find."""

    def __init__(self, process_id: str, instance: str) -> None:
        super().__init__(process_id)
        self.process_id = process_id
        self.instance = instance


class TooManyProcesses(RuntimeError):
    pass


class StdinUnavailable(RuntimeError):
    pass


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="milliseconds")


class BackgroundProcess:
    """One started command: its buffers, its pump thread and its stdin."""

    def __init__(self, process_id: str, owner: Owner, spec: CommandSpec, buffer_bytes: int) -> None:
        self.id = process_id
        self.owner = owner
        self.command = spec.command
        self.cwd = spec.cwd
        self.sandbox = spec.sandbox
        self.stdout = RingBuffer(buffer_bytes)
        self.stderr = RingBuffer(buffer_bytes)
        self._proc = spawn(spec, stdin_pipe=True)
        self.pid = self._proc.pid
        self.started_at = time.time()
        self._started = time.monotonic()
        self._ended: float | None = None
        self.ended_at: float | None = None
        self.outcome: Outcome | None = None
        # Why toolroute ended it, when it did (None: it ended by itself, or still runs).
        self.stopped_because: str | None = None
        # Why its output is gone, once released to keep the servers' memory bounded.
        self.output_released: str | None = None
        self._done = threading.Event()
        self._stdin_lock = threading.Lock()
        self._stdin_closed = False
        try:
            assert self._proc.stdin is not None
            os.set_blocking(self._proc.stdin.fileno(), False)
            self._pump = Pump(
                self._proc, self.stdout.write, self.stderr.write, owns_stdin=False, paced=True, contained=spec.contained
            )
            self._thread = threading.Thread(target=self._run, name=f"toolroute-bash-{process_id}", daemon=True)
            self._thread.start()
        except BaseException:  # e.g. no thread could be started: do not leave the command running
            signal_group(self.pid, signal.SIGKILL)
            self._proc.wait()
            close_pipes(self._proc)
            raise

    def _run(self) -> None:
        try:
            self.outcome = self._pump.run()
        except BaseException:
            # Never leave the group running or the shell unreaped, whatever went wrong.
            signal_group(self.pid, signal.SIGKILL)
            returncode = self._proc.wait()
            self.outcome = Outcome(returncode, False, False, True, False, False)
            raise
        finally:
            self.ended_at = time.time()
            self._ended = time.monotonic()
            self._close_stdin()
            self._done.set()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    @property
    def status(self) -> str:
        if self.outcome is None:
            return "RUNNING"
        return "STOPPED" if self.outcome.stopped else "EXITED"

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def stop(self, because: str = STOPPED_ON_REQUEST) -> bool:
        """End the group (SIGTERM, grace, SIGKILL); True once it has ended."""
        if self._done.is_set():
            return True
        self.request_stop(because)
        return self._done.wait(STOP_WAIT)

    def request_stop(self, because: str) -> None:
        if self.stopped_because is None and not self._done.is_set():
            self.stopped_because = because
        self._pump.request_stop()

    @property
    def buffered(self) -> int:
        """Bytes its output buffers hold now."""
        return self.stdout.held + self.stderr.held

    def release_output(self, because: str) -> int:
        """Let go of an ended process's output (its status stays); the bytes freed."""
        self.output_released = because
        return self.stdout.release() + self.stderr.release()

    @property
    def pump(self) -> Pump:
        return self._pump

    def write(self, data: bytes, *, close: bool = False) -> int:
        """Write all of `data` to stdin (then close it if asked); returns bytes written."""
        with self._stdin_lock:
            stdin = self._proc.stdin
            if not self.running:
                raise StdinUnavailable(f"{self.id} has ended; its stdin is closed")
            if self._stdin_closed or stdin is None:
                raise StdinUnavailable(f"stdin of {self.id} was closed (close_stdin)")
            written = 0
            deadline = time.monotonic() + STDIN_WAIT
            view = memoryview(data)
            try:
                while written < len(view):
                    try:
                        written += os.write(stdin.fileno(), view[written:])
                    except BlockingIOError:
                        left = deadline - time.monotonic()
                        if left <= 0 or not select.select([], [stdin.fileno()], [], left)[1]:
                            raise StdinUnavailable(
                                f"{self.id} is not reading its stdin: wrote {written} of {len(view)} bytes "
                                f"in {STDIN_WAIT:g} s"
                            ) from None
            except BrokenPipeError:
                raise StdinUnavailable(f"{self.id} closed its stdin (or has exited)") from None
            if close:
                self._close_stdin_locked()
            return written

    def _close_stdin(self) -> None:
        with self._stdin_lock:
            self._close_stdin_locked()

    def _close_stdin_locked(self) -> None:
        if not self._stdin_closed and self._proc.stdin is not None:
            self._stdin_closed = True
            with contextlib.suppress(OSError):  # nothing was buffered; the fd is closed regardless
                self._proc.stdin.close()

    def logs(self, stream: str, offset: int | None, limit: int) -> Chunk:
        ring = self.stdout if stream == "stdout" else self.stderr
        return read_chunk(ring, offset, limit, final=not self.running)

    def snapshot(self) -> dict[str, Any]:
        outcome = self.outcome
        end = self._ended if self._ended is not None else time.monotonic()
        return {
            "processId": self.id,
            "command": self.command,
            "workingDirectory": str(self.cwd),
            "status": self.status,
            "pid": self.pid,
            "exitCode": None if outcome is None else outcome.exit_code,
            "signal": None if outcome is None else outcome.signal_name,
            "startedAt": _iso(self.started_at),
            "endedAt": _iso(self.ended_at),
            "runtimeSeconds": round(end - self._started, 3),
            "stdoutBytes": self.stdout.total,
            "stderrBytes": self.stderr.total,
            "stdinOpen": not self._stdin_closed,
            **({"endedBecause": self.ended_because()} if outcome is not None else {}),
            **({"outputReleased": self.output_released} if self.output_released else {}),
        }

    def ended_because(self) -> str:
        """Why it ended, in words: stopped by toolroute (and why), or on its own."""
        outcome = self.outcome
        if self.stopped_because is not None:
            return self.stopped_because
        if outcome is not None and outcome.stopped:  # by the host's own signal handling
            return HOST_ENDING
        if outcome is not None and outcome.signal_name is not None:
            return f"it was killed by {outcome.signal_name}, not by toolroute"
        return "it exited by itself"


def _end_all(
    processes: dict[str, BackgroundProcess], commands: set[Pump], lock: threading.Lock, creator_pid: int
) -> None:
    """Stop every process in parallel: signal all groups first, then wait for each."""
    if os.getpid() != creator_pid:  # a forked child must not kill its parent's processes
        return
    with lock:
        procs = list(processes.values())
        running = list(commands)
    for proc in procs:
        proc.request_stop(ROUTER_CLOSED)
    for pump in running:
        pump.request_stop()
    for proc in procs:
        proc.wait(STOP_WAIT)
    for pump in running:
        pump.done.wait(STOP_WAIT)


class ProcessTable:
    """The background processes of one router. Thread-safe.

    It also owns the private temp folders of sandboxed commands, and while it is open the host's
    SIGTERM and SIGHUP end its commands first (see `hostsignals`)."""

    def __init__(self, max_buffer_bytes: int = TABLE_BUFFER_BYTES) -> None:
        self.max_buffer_bytes = max_buffer_bytes
        self._lock = threading.Lock()
        self._procs: dict[str, BackgroundProcess] = {}
        self._commands: set[Pump] = set()  # exec calls running right now
        self._closed = False
        self.private_tmp = PrivateTmp()
        self._finalizer = weakref.finalize(self, _end_all, self._procs, self._commands, self._lock, os.getpid())
        hostsignals.register(self)

    def running_pumps(self) -> list[Pump]:
        """Every running command's pump, exec and background. Takes no lock: it is called from
        a signal handler, which may have interrupted this very thread while it held one (copying
        a dict's values is atomic under the GIL)."""
        procs = list(self._procs.values())
        return [*list(self._commands), *(p.pump for p in procs if p.running)]

    @contextlib.contextmanager
    def foreground(self, pump: Pump) -> Iterator[None]:
        """Track an `exec` while it runs, so that closing the table ends it too."""
        with self._lock:
            if self._closed:
                pump.request_stop()
            self._commands.add(pump)
        try:
            yield
        finally:
            with self._lock:
                self._commands.discard(pump)

    def start(self, owner: Owner, spec: CommandSpec, *, max_running: int, buffer_bytes: int) -> BackgroundProcess:
        """Start `spec` for `owner`. What its output may hold counts against two budgets: the
        owner's (`max_running` processes' worth of buffers, its ended ones' output included) and
        the table's (`max_buffer_bytes`, every owner's); ended processes' output is released,
        oldest first, to make room, and a start that still does not fit is refused."""
        with self._lock:
            if self._closed:
                raise TooManyProcesses("the process table is closed (its router was closed)")
            running = [p for p in self._procs.values() if p.owner == owner and p.running]
            if len(running) >= max_running:
                ids = ", ".join(p.id for p in running)
                raise TooManyProcesses(
                    f"too many background processes: {len(running)} of {max_running} are running in this "
                    f"workspace ({ids}); stop one with action=stop before starting another"
                )
            self._prune(owner)
            need = 2 * buffer_bytes
            mine = [p for p in self._procs.values() if p.owner == owner]
            self._make_room(mine, max_running * need - need, "this workspace's")
            self._make_room(list(self._procs.values()), self.max_buffer_bytes - need, "the server's")
            if self._committed(list(self._procs.values())) + need > self.max_buffer_bytes:
                raise TooManyProcesses(
                    f"the background processes running on this server already hold what their output may "
                    f"({self.max_buffer_bytes // 2**20} MiB in all); stop one of yours or try again later"
                )
            proc = BackgroundProcess(new_process_id(), owner, spec, buffer_bytes)
            self._procs[proc.id] = proc
            return proc

    @staticmethod
    def _committed(procs: list[BackgroundProcess]) -> int:
        """What `procs`' output holds or may grow to: a running process's whole buffers, an
        ended one's what it holds."""
        return sum(2 * p.stdout.capacity if p.running else p.buffered for p in procs)

    def _make_room(self, procs: list[BackgroundProcess], room: int, whose: str) -> None:
        """Release ended processes' output, oldest first, until `procs` commit at most `room`."""
        over = self._committed(procs) - room
        ended = sorted((p for p in procs if not p.running and p.buffered), key=lambda p: p.started_at)
        for proc in ended:
            if over <= 0:
                return
            over -= proc.release_output(f"released to keep {whose} background output within its memory budget")

    def release_ended(self, owner: Owner) -> int:
        """Forget `owner`'s ended processes (their owner left: served mode's idle release);
        running ones stay. Returns how many went."""
        with self._lock:
            ended = [pid for pid, p in self._procs.items() if p.owner == owner and not p.running]
            for pid in ended:
                del self._procs[pid]
        return len(ended)

    def running_count(self) -> int:
        """Background processes running now, every owner's."""
        return sum(1 for p in list(self._procs.values()) if p.running)

    def _prune(self, owner: Owner) -> None:
        ended = [p for p in self._procs.values() if p.owner == owner and not p.running]
        for proc in sorted(ended, key=lambda p: p.started_at)[: max(0, len(ended) - RETAIN_FINISHED + 1)]:
            del self._procs[proc.id]

    def get(self, owner: Owner, process_id: str) -> BackgroundProcess:
        """The owner's process; another owner's id is as unknown as a made-up one. An id from
        another server instance raises LostProcess (it cannot be anybody's process here)."""
        proc = self._procs.get(process_id)
        if proc is None or proc.owner != owner:
            instance = instance_of(process_id)
            if instance is not None and instance != INSTANCE:
                raise LostProcess(process_id, instance)
            raise UnknownProcess(process_id)
        return proc

    def list(self, owner: Owner) -> list[BackgroundProcess]:
        with self._lock:
            procs = [p for p in self._procs.values() if p.owner == owner]
        return sorted(procs, key=lambda p: p.started_at)

    def all(self) -> Iterable[BackgroundProcess]:
        with self._lock:
            return list(self._procs.values())

    def close(self) -> None:
        """End every process (group-wide, graceful then forced) and refuse new ones."""
        with self._lock:
            self._closed = True
        self._finalizer()
        self.private_tmp.close()
        hostsignals.unregister(self)
