"""Spawning a command and pumping it: output into sinks, then the end of its whole process group.

One `Pump` drives one child, in the caller's thread (`exec`) or a daemon thread (`start`). It waits
on the child's pipes and on a pidfd (so the shell's exit is seen even while a grandchild still
holds the pipes open: the hang of codex#4337) and ends the process group when asked to, when the
deadline passes, or when the shell exits and leaves processes behind. Ending is SIGTERM to the
group, then SIGKILL after a grace period. The shell is always reaped by us; nothing is orphaned.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolroute._platform import LINUX_NATIVE
from toolroute.builtins._process.deathwatch import DeathWatch
from toolroute.builtins._process.group import group_finished, signal_group
from toolroute.builtins._process.launcher import LAUNCHER
from toolroute.builtins._process.sandbox import (
    SandboxPlan,
    SandboxUnavailable,
    bubblewrap_argv,
    landlock_argv,
    socket_filter_fd,
)
from toolroute.progress import ProgressSink, report_interval

TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL to the group
KILL_WAIT = 5.0  # after SIGKILL, how long to wait for the group before giving up on it
DRAIN_WAIT = 1.0  # after the group is gone, how long a process that left it may hold the pipes
GROUP_POLL = 0.02  # how often to look for leftovers once the shell has exited
EXIT_POLL = 0.01  # without a pidfd (portable path), how often to ask whether the shell exited
# The host's one watchdog (deathwatch.py): finds what is left of its commands when it dies.
WATCH = DeathWatch(via="proc" if LINUX_NATIVE else "ps")
READ_SIZE = 1 << 16
SANDBOX_START_WAIT = 30.0
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
# A paced pump (background processes) reads each pipe at most once per READ_INTERVAL, taking up
# to a whole (enlarged) pipe per read: a chatty process then costs the host a few dozen wake-ups
# a second instead of one per write, and blocks on its full pipe in between, like a program
# writing to a terminal nobody scrolls. Throughput is bounded by PIPE_SIZE / READ_INTERVAL.
READ_INTERVAL = 0.02
PIPE_SIZE = 1 << 20


class SpawnError(RuntimeError):
    """The command could not be started; the message is meant for the model."""


@dataclass(frozen=True)
class CommandSpec:
    command: str
    cwd: Path
    env: Mapping[str, str]
    sandbox: SandboxPlan | None = None  # None: unconfined
    # Descriptors the command inherits at the same numbers (a code program's tool channel).
    pass_fds: tuple[int, ...] = ()

    @property
    def contained(self) -> bool:
        """Whether the command runs in a PID namespace of its own (bubblewrap), whose every
        process the kernel has killed by the time the leader (bwrap) exits by itself (not when
        a signal killed bwrap mid-setup: see Pump._vouched_for)."""
        # Not with a network of its own: pasta, bwrap's parent, lives in the host's PID namespace
        # (and a pasta that failed to start can leave a helper behind in the group).
        return self.sandbox is not None and self.sandbox.kind == "bubblewrap" and not self.sandbox.own_network


@dataclass(frozen=True)
class Outcome:
    returncode: int  # as subprocess reports it: negative for a signal
    timed_out: bool
    stopped: bool
    forced: bool  # SIGKILL was needed
    leftovers: bool  # the shell exited but left processes in its group, which were ended
    unkillable: bool  # processes survived SIGKILL for KILL_WAIT (uninterruptible sleep)

    @property
    def exit_code(self) -> int:
        """The shell convention: 128 + signal number for a signal."""
        return self.returncode if self.returncode >= 0 else 128 - self.returncode

    @property
    def signal_name(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


_bash: str | None = None


def bash_path() -> str:
    global _bash
    if _bash is None:
        _bash = shutil.which("bash") or "/bin/bash"
    return _bash


def has_controlling_terminal() -> bool:
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
    except OSError:
        return False
    return True


def isolation() -> dict[str, Any]:
    """Popen arguments that give the child its own process group and no controlling terminal.

    A new session (setsid) gives both, but costs a new scheduler autogroup: measured 2.5x the time
    of a plain `subprocess.run` of `true` on a loaded 2-core machine, against 1.1x for a process
    group alone. So when this process has no controlling terminal to inherit (servers, CI) a
    process group is enough; with one (a host run from a terminal) the child gets its own session.
    """
    if sys.version_info >= (3, 11) and not has_controlling_terminal():
        return {"process_group": 0}
    return {"start_new_session": True}


class SpawnFigures:
    """Commands started, by sandbox (`none`, `bubblewrap`, `landlock`): how many started, how
    many failed to, and the seconds their starts took in all (served mode's metrics read them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figures: dict[str, list[float]] = {}  # sandbox -> [started, failed, seconds]

    def note(self, sandbox: str, seconds: float, started: bool) -> None:
        with self._lock:
            figures = self._figures.setdefault(sandbox, [0, 0, 0.0])
            figures[0 if started else 1] += 1
            figures[2] += seconds

    def snapshot(self) -> dict[str, tuple[int, int, float]]:
        with self._lock:
            return {k: (int(v[0]), int(v[1]), v[2]) for k, v in self._figures.items()}


SPAWNS = SpawnFigures()


def spawn(spec: CommandSpec, *, stdin_pipe: bool) -> subprocess.Popen[bytes]:
    """Start `bash -c command` (confined as `spec.sandbox` says) as the leader of its own process
    group, with no controlling terminal. Under bubblewrap the leader is bwrap, and the command
    stays in its group: signalling the group reaches both. Counted in `SPAWNS`."""
    began = time.monotonic()
    sandbox = "none" if spec.sandbox is None else spec.sandbox.kind
    try:
        proc = _spawn(spec, stdin_pipe)
    except BaseException:
        SPAWNS.note(sandbox, time.monotonic() - began, started=False)
        raise
    SPAWNS.note(sandbox, time.monotonic() - began, started=True)
    return proc


def _spawn(spec: CommandSpec, stdin_pipe: bool) -> subprocess.Popen[bytes]:
    argv = [bash_path(), "-c", spec.command]
    plan = spec.sandbox
    status_r = -1
    # A descriptor only the child needs: bubblewrap's seccomp filter, or the Landlock helper's
    # status pipe (the parent reads `status_r`).
    child_fd: int | None = None
    try:
        if plan is not None and plan.kind == "bubblewrap":
            child_fd = socket_filter_fd(plan)
            argv = bubblewrap_argv(argv, plan, spec.cwd, child_fd)
        elif plan is not None:
            status_r, child_fd = os.pipe()
            argv = landlock_argv(argv, plan, child_fd)
    except (SandboxUnavailable, OSError) as exc:
        for fd in (status_r, child_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
        raise SpawnError(f"the sandbox ({plan.kind if plan else '?'}) cannot be used: {exc}") from None
    # bubblewrap's PID namespace dies with the host by itself, once bwrap has set its parent-death
    # signal; a host that dies while bwrap starts leaves it without one (an orphaned sandbox in 3
    # of 5 stops after a burst of commands): the watchdog finds it by the marker then.
    env = {**spec.env, **WATCH.marker()}
    identity: dict[str, Any] = {}
    if plan is not None and plan.kind == "bubblewrap" and plan.uid is not None:
        # bwrap itself runs as the tenant's uid (an unprivileged user namespace); the Landlock
        # helper drops to it on its own, after the host's interpreter has been loaded.
        identity = {"user": plan.uid, "group": plan.uid, "extra_groups": []}

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            cwd=spec.cwd,
            env=env,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(*spec.pass_fds, *(() if child_fd is None else (child_fd,))),
            **identity,
            **isolation(),
        )

    try:
        # On the launcher thread: the child's parent-death signal follows the thread that forked
        # it, and worker threads end long before the commands they start (launcher.py).
        proc = LAUNCHER.run(popen, _abandon)
    except OSError as exc:
        if status_r >= 0:
            os.close(status_r)
        raise SpawnError(f"could not start {argv[0]}: {exc}") from None
    finally:
        if child_fd is not None:
            os.close(child_fd)
    if status_r >= 0:
        _await_sandbox(proc, status_r)
    return proc


def _abandon(proc: subprocess.Popen[bytes]) -> None:
    """End a child whose caller stopped waiting for it to start."""
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    close_pipes(proc)


def _await_sandbox(proc: subprocess.Popen[bytes], status_r: int) -> None:
    """Read the helper's status pipe: EOF means bash was exec'd under Landlock."""
    message, started = b"", False
    try:
        with selectors.PollSelector() as sel:
            sel.register(status_r, selectors.EVENT_READ)
            deadline = time.monotonic() + SANDBOX_START_WAIT
            while time.monotonic() < deadline and sel.select(deadline - time.monotonic()):
                chunk = os.read(status_r, 4096)
                if not chunk:
                    started = not message
                    break
                message += chunk
    finally:
        os.close(status_r)
    if started:
        return
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    close_pipes(proc)
    raise SpawnError(message.decode("utf-8", "replace") or "the Landlock helper did not start the command in time")


def enlarge_pipes(proc: subprocess.Popen[bytes]) -> int:
    """Grow the child's output pipes to PIPE_SIZE where allowed; returns the read size to use."""
    size = PIPE_SIZE
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                fcntl.fcntl(pipe.fileno(), F_SETPIPE_SZ, PIPE_SIZE)
            except OSError:  # above /proc/sys/fs/pipe-max-size for this user: keep the default
                size = READ_SIZE
    return size


def close_pipes(proc: subprocess.Popen[bytes], *, stdin: bool = True) -> None:
    """Close the parent's ends of the child's pipes (`stdin=False` leaves stdin to its owner)."""
    for pipe in (proc.stdin if stdin else None, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):  # stdin whose reader is gone: the fd is closed anyway
                pipe.close()


def _sooner(timeout: float | None, wait: float) -> float:
    """The select timeout once something is due in `wait` seconds (None: nothing was due)."""
    wait = max(0.0, wait)
    return wait if timeout is None else min(timeout, wait)


_EXIT = object()
_WAKE = object()
_STDIN = object()


class Pump:
    """Drives one child to its end. `request_stop()` may be called from any thread."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        stdout: Callable[[bytes], object],
        stderr: Callable[[bytes], object],
        *,
        stdin_data: bytes | None = None,
        owns_stdin: bool = True,
        stoppable: bool = True,
        paced: bool = False,
        contained: bool = False,
        grace: float = TERM_GRACE,
        progress: ProgressSink | None = None,
    ) -> None:
        """`stdin_data` is fed to the child, then stdin is closed. With `owns_stdin=False` the
        caller writes to and closes stdin itself (background processes). Only a `stoppable` pump
        (one that another thread may stop) needs the wake-up pipe. A `paced` pump reads at most
        every READ_INTERVAL (see there). A `contained` command (CommandSpec.contained) is over
        when its leader exits by itself (`_vouched_for`): no /proc scan for leftovers, which
        costs milliseconds on a busy host.
        With `progress`, how long the command has run (and how much it printed) is reported every
        `report_interval()` seconds."""
        self.proc = proc
        self._progress = progress
        self._printed = 0
        self.pgid = proc.pid  # the child leads its own process group
        self._sinks = {proc.stdout: stdout, proc.stderr: stderr}
        self._paced = paced
        self._contained = contained
        self._read_size = enlarge_pipes(proc) if paced else READ_SIZE
        self._stdin_data = memoryview(stdin_data) if stdin_data is not None else None
        self._owns_stdin = owns_stdin
        self._grace = grace
        self._stop = False
        self.done = threading.Event()  # set once run() has returned (or failed)
        self._wake_lock = threading.Lock()  # the wake fds must not be written once closed (fd reuse)
        self._wake_closed = not stoppable
        if stoppable:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_w, False)

    def mark_stopped(self) -> None:
        """Report the outcome as stopped; whoever calls this signals the group itself."""
        self._stop = True

    def request_stop(self) -> None:
        self._stop = True
        with self._wake_lock:
            if not self._wake_closed:
                with contextlib.suppress(BlockingIOError):  # already full of wake-ups
                    os.write(self._wake_w, b"x")

    def run(self, deadline: float | None = None) -> Outcome:
        """Pump until the group is gone and the pipes are drained; `deadline` is monotonic time."""
        proc, pgid = self.proc, self.pgid
        sel = selectors.PollSelector()
        # The shell's exit wakes the loop through a pidfd on Linux; elsewhere it is polled for.
        pidfd = os.pidfd_open(proc.pid) if LINUX_NATIVE else None
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, _EXIT)
        if not self._wake_closed:
            sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        outputs = {pipe.fileno(): sink for pipe, sink in self._sinks.items() if pipe is not None}
        for fd, sink in outputs.items():
            sel.register(fd, selectors.EVENT_READ, sink)
        resume_at: float | None = None  # a paced pump's outputs are unwatched until then
        if self._stdin_data is not None and proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, _STDIN)

        started = time.monotonic()
        report_at = started + report_interval() if self._progress is not None else None
        exited = finished = timed_out = stopped = leftovers = unkillable = False
        term_at: float | None = None
        kill_at: float | None = None
        drain_until = 0.0
        try:
            while True:
                now = time.monotonic()
                if not exited and term_at is None:
                    if self._stop:
                        stopped = True
                    elif deadline is not None and now >= deadline:
                        timed_out = True
                    if stopped or timed_out:
                        term_at = self._terminate(now)
                if exited and not finished:
                    if self._vouched_for(proc) or group_finished(pgid):
                        finished, drain_until = True, now + DRAIN_WAIT
                    elif term_at is None:
                        leftovers = True
                        term_at = self._terminate(now)
                if term_at is not None and kill_at is None and not finished and now >= term_at + self._grace:
                    signal_group(pgid, signal.SIGKILL)
                    kill_at = now
                if kill_at is not None and not finished and now >= kill_at + KILL_WAIT:
                    # Stuck in uninterruptible I/O: stop waiting. An unreaped shell is left to
                    # subprocess's own reaping of abandoned children.
                    unkillable = finished = True
                    drain_until = now
                if finished and (not outputs or now >= drain_until):
                    break
                if resume_at is not None and now >= resume_at:
                    resume_at = None
                    for fd, sink in outputs.items():
                        sel.register(fd, selectors.EVENT_READ, sink)

                timeout = self._next_wait(now, deadline, exited, finished, term_at, kill_at, drain_until)
                if resume_at is not None:
                    timeout = _sooner(timeout, resume_at - now)
                if pidfd is None and not exited:
                    timeout = _sooner(timeout, EXIT_POLL)
                if report_at is not None and not exited:
                    if now >= report_at:
                        report_at = self._report(now - started)
                    timeout = _sooner(timeout, report_at - now)
                read_any = False
                for key, _ in sel.select(timeout):
                    data = key.data
                    if data is _EXIT:
                        sel.unregister(key.fd)
                        proc.wait()
                        exited = True
                    elif data is _WAKE:
                        os.read(self._wake_r, 512)
                    elif data is _STDIN:
                        if self._feed_stdin():
                            sel.unregister(key.fd)
                    else:
                        chunk = os.read(key.fd, self._read_size)
                        if chunk:
                            self._printed += len(chunk)
                            data(chunk)
                            read_any = True
                        else:
                            sel.unregister(key.fd)
                            del outputs[key.fd]
                if pidfd is None and not exited and proc.poll() is not None:
                    exited = True
                if self._paced and read_any and resume_at is None:
                    resume_at = time.monotonic() + READ_INTERVAL
                    for fd in outputs:
                        sel.unregister(fd)
        finally:
            if not finished:  # interrupted (KeyboardInterrupt, a bug): never leave the group behind
                signal_group(pgid, signal.SIGKILL)
                proc.wait()
            sel.close()
            if pidfd is not None:
                os.close(pidfd)
            with self._wake_lock:
                if not self._wake_closed:
                    self._wake_closed = True
                    os.close(self._wake_r)
                    os.close(self._wake_w)
            close_pipes(proc, stdin=self._owns_stdin)
            self.done.set()
        returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        return Outcome(returncode, timed_out, stopped, kill_at is not None, leftovers, unkillable)

    def _vouched_for(self, proc: subprocess.Popen[bytes]) -> bool:
        """Whether the leader's exit alone ends the command: a contained one whose bwrap exited
        by itself, which it does only once its namespace's init has (taking every process of
        the namespace with it). A bwrap killed by a signal (a stop's SIGTERM) while it still set
        the sandbox up leaves the init it cloned alive: that init sets its parent-death signal
        only after the setup, so it is orphaned instead of killed, and runs the command to its
        end. Its group is then looked at, and SIGKILLed after the grace, like an uncontained one."""
        return self._contained and proc.returncode is not None and proc.returncode >= 0

    def _report(self, elapsed: float) -> float:
        """One progress report (whole seconds run, which only grow); the time of the next."""
        assert self._progress is not None
        seconds = int(elapsed)
        self._progress.report(seconds, None, f"running for {seconds} s, {self._printed} bytes of output so far")
        return time.monotonic() + report_interval()

    def _terminate(self, now: float) -> float:
        signal_group(self.pgid, signal.SIGTERM)
        signal_group(self.pgid, signal.SIGCONT)  # a stopped process would never see the SIGTERM
        return now

    def _next_wait(
        self,
        now: float,
        deadline: float | None,
        exited: bool,
        finished: bool,
        term_at: float | None,
        kill_at: float | None,
        drain_until: float,
    ) -> float | None:
        waits: list[float] = []
        if deadline is not None and term_at is None and not exited:
            waits.append(deadline - now)
        if term_at is not None and kill_at is None and not finished:
            waits.append(term_at + self._grace - now)
        if kill_at is not None and not finished:
            waits.append(kill_at + KILL_WAIT - now)
        if exited and not finished:
            waits.append(GROUP_POLL)
        if finished:
            waits.append(drain_until - now)
        return max(0.0, min(waits)) if waits else None

    def _feed_stdin(self) -> bool:
        """Write what the pipe takes; True once stdin is done (all written, or the reader left)."""
        stdin, data = self.proc.stdin, self._stdin_data
        assert stdin is not None and data is not None
        try:
            written = os.write(stdin.fileno(), data[:READ_SIZE])
        except BlockingIOError:
            return False
        except OSError:  # BrokenPipe: the command does not read its input
            written = len(data)
        self._stdin_data = data = data[written:]
        if len(data) == 0:
            stdin.close()
            return True
        return False
