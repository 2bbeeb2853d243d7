"""The host's SIGTERM and SIGHUP end every command before the host acts on them.

A handler is chained in front of whatever handler is installed (never replacing it): it signals
every running command's process group (SIGTERM, then SIGKILL after the grace period), then calls
the previous handler, or for the default action restores it and re-raises the signal so the host
ends as it would have. A signal the host ignores (SIG_IGN, e.g. under nohup) stays ignored and
ends nothing.

Process tables register while open; the first open table installs the chain (when created on the
main thread, the only one Python lets install handlers) and the last one to close restores what
was there, if nobody has chained on top since. Hosts that create tables on worker threads (servers)
call `chained()` on the main thread themselves, after their own handlers are in place.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, Protocol

from toolroute.builtins._process.group import group_finished, signal_group

HANDLED: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)
GRACE = 1.0  # seconds between SIGTERM and SIGKILL, as for a timeout
POLL = 0.01


class _Stoppable(Protocol):
    pgid: int

    def mark_stopped(self) -> None: ...


class _Table(Protocol):
    def running_pumps(self) -> Sequence[_Stoppable]: ...


_tables: weakref.WeakSet[Any] = weakref.WeakSet()
_installed: list[Chain] = []  # installed by table registration, restored with the last table
_registry_lock = threading.Lock()


def end_all_commands(grace: float = GRACE) -> int:
    """SIGTERM every running command's group, wait up to `grace`, SIGKILL what is left.

    Safe in a signal handler: no locks are taken. Returns the number of groups signalled."""
    pumps: list[_Stoppable] = []
    for table in list(_tables):
        pumps.extend(table.running_pumps())
    groups = {pump.pgid for pump in pumps}
    for pump in pumps:
        pump.mark_stopped()
    for pgid in groups:
        signal_group(pgid, signal.SIGTERM)
        signal_group(pgid, signal.SIGCONT)
    deadline = time.monotonic() + grace
    left = set(groups)
    while left and time.monotonic() < deadline:
        left = {pgid for pgid in left if not group_finished(pgid)}
        if left:
            time.sleep(POLL)
    for pgid in left:
        signal_group(pgid, signal.SIGKILL)
    return len(groups)


Handler = Callable[[int, FrameType | None], Any] | int | None


class Chain:
    """Our handler in front of `previous` for one signal."""

    def __init__(self, signum: signal.Signals, previous: Handler) -> None:
        self.signum = signum
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        end_all_commands()
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):  # None: installed outside Python; act as default
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    def restore(self) -> None:
        """Put `previous` back, unless someone chained on top of us since (then stay, harmless)."""
        signum, previous = self.signum, self.previous if self.previous is not None else signal.SIG_DFL
        if signal.getsignal(signum) is self:
            signal.signal(signum, previous)


def install(signals: Sequence[signal.Signals] = HANDLED) -> list[Chain]:
    """Chain in front of the current handlers; a no-op off the main thread and for ignored signals."""
    if threading.current_thread() is not threading.main_thread():
        return []
    chains = []
    for signum in signals:
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN or isinstance(current, Chain):
            continue
        chain = Chain(signum, current)
        signal.signal(signum, chain)
        chains.append(chain)
    return chains


@contextlib.contextmanager
def chained(signals: Sequence[signal.Signals] = HANDLED) -> Iterator[list[Chain]]:
    """`install` for a block, restored after it."""
    chains = install(signals)
    try:
        yield chains
    finally:
        for chain in reversed(chains):
            chain.restore()


def register(table: _Table) -> None:
    with _registry_lock:
        _tables.add(table)
        if not _installed:
            _installed.extend(install())


def unregister(table: _Table) -> None:
    with _registry_lock:
        _tables.discard(table)
        if not _tables and _installed:
            for chain in reversed(_installed):
                if threading.current_thread() is threading.main_thread():
                    chain.restore()
            _installed.clear()
