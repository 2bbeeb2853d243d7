"""Cancellation of a tool call that runs on a worker thread.

A thread cannot be cancelled; the async task awaiting it can (an MCP client that disconnects or
sends `notifications/cancelled` cancels its request's task). `run_sync_cancellable` gives each
sync call a `CancelToken`, which the worker thread inherits through a context variable; when the
awaiting task is cancelled the token fires, and a tool that blocks on something stoppable (bash's
running command) has registered a callback that stops it. The task then waits, boundedly, for the
thread to return, so per-call resources (a user's concurrency slot) are not released early.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import anyio

from toolroute._workers import run_off_loop

T = TypeVar("T")

# After a cancel, how long the cancelled task waits for its thread (bash needs TERM_GRACE plus a
# little); a tool that ignores the token is then abandoned, as a thread cannot be killed.
CANCEL_WAIT = 10.0
_POLL = 0.02
# Set when the process is ending (a served server's SIGTERM): a cancelled call no longer waits
# for its thread, as its slot means nothing any more and the exit has a promised bound.
_ENDING = threading.Event()


def process_ending() -> None:
    """The process is ending: cancelled calls stop waiting for their threads (now and later)."""
    _ENDING.set()


class CancelToken:
    """Fires once; callbacks registered with `on_cancel` run in the cancelling thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    @contextlib.contextmanager
    def on_cancel(self, callback: Callable[[], object]) -> Iterator[None]:
        """Run `callback` if the token fires while the block runs (at once if it already has)."""
        with self._lock:
            fired = self._event.is_set()
            if not fired:
                self._callbacks.append(callback)
        if fired:
            callback()
        try:
            yield
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._callbacks.remove(callback)


_current: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("toolroute_cancel_token", default=None)


def current_cancel_token() -> CancelToken | None:
    """The token of the tool call running in this thread or task, if it can be cancelled."""
    return _current.get()


@contextlib.contextmanager
def stop_on_cancel(stop: Callable[[], object]) -> Iterator[None]:
    """Call `stop` if the current call is cancelled while the block runs (no-op without a token)."""
    token = _current.get()
    if token is None:
        yield
        return
    with token.on_cancel(stop):
        yield


async def run_sync_cancellable(fn: Callable[[], T]) -> T:
    """`fn()` on a worker thread (context variables carried over); cancelling the awaiting task
    fires the thread's `CancelToken`, then waits up to CANCEL_WAIT for `fn` to return. Work
    cancelled while it still waited for a thread never starts, and is not waited for."""
    token = CancelToken()
    finished = threading.Event()
    state = threading.Lock()
    began = False

    def work() -> T:
        nonlocal began
        with state:
            if token.cancelled:  # cancelled while it waited for a thread: nothing to do
                raise anyio.get_cancelled_exc_class()()
            began = True
        try:
            return fn()
        finally:
            finished.set()

    reset = _current.set(token)
    try:
        return await run_off_loop(work)  # a warm thread, no executor layers (see _workers.py)
    except anyio.get_cancelled_exc_class():
        with state:
            token.cancel()
            waiting = began
        if waiting:
            with anyio.CancelScope(shield=True):
                deadline = time.monotonic() + CANCEL_WAIT
                while not finished.is_set() and not _ENDING.is_set() and time.monotonic() < deadline:
                    await anyio.sleep(_POLL)
        raise
    finally:
        _current.reset(reset)


@contextlib.contextmanager
def using_cancel_token(token: CancelToken) -> Iterator[None]:
    """Run the block as a call cancelled by `token` (e.g. a code program's inner calls, whose
    token fires when the program ends or its own call is cancelled)."""
    reset = _current.set(token)
    try:
        yield
    finally:
        _current.reset(reset)
