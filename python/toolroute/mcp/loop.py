"""The gateway's one event loop: every MCP session lives on it, run by one thread at a time.

Every session lives on this loop, so the owner task of a connection always enters and exits its
transport in the same task, and a synchronous caller (even one inside its own running event
loop) never nests loops or deadlocks.

Who runs it (leader and followers):
- A background thread, whenever async callers have work on it (`submit`, `arun`); and once it
  has been free for `LINGER`, the same thread watches its descriptors and timers without
  holding it, and runs it for one round whenever one is ready: a server's notifications, pings
  and replies are served between calls, and a synchronous caller who comes finds it free.
- A synchronous caller that finds it free runs it in its own thread for the length of its call,
  as a bare SDK session driven by `run_until_complete` would be: the server's reply wakes the
  caller itself, not a second thread that then wakes the caller (two wake-ups a call, about a
  tenth of a stdio round trip on two cores). So a caller making calls in quick succession keeps
  the loop between them.
- A synchronous caller that finds it busy hands its call to whoever runs it, and waits; if the
  loop comes free before its call is done, it runs the loop itself.

A Ctrl-C while the main thread runs the loop cancels that thread's call and then raises
KeyboardInterrupt from it, as `asyncio.run` does: raised where the signal happened to land, it
could end a session's own task instead. A Ctrl-C while it waits for another thread's run raises
at once and cancels its call there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import math
import os
import select
import selectors
import signal
import threading
import time
from collections.abc import Coroutine
from enum import Enum
from typing import Any, Generic, TypeVar

import anyio.to_thread

from toolroute.errors import ToolExecutionError

T = TypeVar("T")

# The C module under `signal`, whose wrappers (enum conversions) cost a few us a call.
try:
    import _signal  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - another interpreter
    _signal = signal
_SIGINT = int(signal.SIGINT)
_DEFAULT_INT = signal.default_int_handler
_MAIN = threading.main_thread()

CLOSED = "the MCP gateway is closed"
CLOSED_DURING = "the MCP gateway was closed during the call"


class _Turn(Enum):
    """What the background thread takes the loop for."""

    SERVE = "serve"  # async work: run it until that is done (or a synchronous call it served is)
    ROUND = "round"  # something became ready while nobody ran it: one round of the loop


_EPOLL: Any = getattr(selectors, "EpollSelector", ())  # Linux only


def _watchable(loop: asyncio.AbstractEventLoop) -> bool:
    """A selector loop, whose descriptors and timers can be watched from outside (not uvloop's,
    not the proactor): the others are held by the background thread while free, as before."""
    return (
        hasattr(select, "poll")
        and isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop)
        and all(hasattr(loop, name) for name in ("_selector", "_ready", "_scheduled"))
    )


class _Call(Generic[T]):
    """A synchronous caller's call: its task once started, and whether it has ended."""

    __slots__ = ("ended", "led", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[T] | None = None
        self.ended = False
        self.led = False  # its own caller runs the loop now: the run ends with the call


class LoopThread:
    """An asyncio loop run by a background thread or by a synchronous caller, until `stop()`."""

    # How long the loop may stay free after a synchronous call before the background thread
    # takes it back: long enough for a caller's next call in a quick succession, short enough
    # that a server's messages between calls wait for no one.
    LINGER = 0.002
    # How often the background thread looks while callers run the loop: each look costs the
    # running caller the GIL once (looking every LINGER cost a stdio round trip 3%).
    LOOK = 0.02

    def __init__(self, name: str = "toolroute-mcp") -> None:
        self._loop = asyncio.new_event_loop()
        self._stopping = False
        self._lock = threading.Lock()
        self._callers = threading.Condition(self._lock)  # callers waiting for a call or the loop
        self._background_turn = threading.Condition(self._lock)
        self._driver: int | None = None  # the thread running the loop now
        self._freed = time.monotonic()  # when a caller last let go of it
        self._wanted = 0  # async work submitted and not done: the background thread serves it
        self._followers = 0
        self._drives = 0  # counts the runs callers have taken
        self._background_waits = False  # the background thread asks to hear of the next let-go
        # On the loop's side (read and written only by whoever runs it):
        self._serving = False  # the background thread runs it (not a caller)
        self._cleaning = False
        self._watchable = _watchable(self._loop)
        self._watching = False  # the background thread waits in `_watch` (lock released)
        # A caller who takes the loop while it is watched writes here first. Else the watch would
        # wake at the server's reply, in the middle of the call, and take the GIL from the
        # caller then (75 us an isolated stdio call); woken now, it settles while the request is
        # out (the caller waits for the server then).
        self._kick_r, self._kick_w = os.pipe() if self._watchable else (-1, -1)
        if self._watchable:
            os.set_blocking(self._kick_r, False)
            os.set_blocking(self._kick_w, False)
        self._thread = threading.Thread(target=self._background, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def on_loop_thread(self) -> bool:
        """Whether this thread is running the loop now."""
        return self._driver == threading.get_ident()

    # ---- the background thread ---------------------------------------------------------------

    def _background(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            while (turn := self._background_takes_turn()) is not None:
                self._serving = True
                try:
                    if turn is _Turn.ROUND:
                        self._loop.call_soon(self._loop.stop)  # what is ready now, and no more
                    self._loop.run_forever()
                finally:
                    self._serving = False
                    self._let_go(by_caller=False)
        finally:
            self._shut()

    def _background_takes_turn(self) -> _Turn | None:
        """Wait until the loop is free and is to be run here; None when stopping (the loop is
        then held here for the cleanup).

        Free for `LINGER`, the loop is watched, not held: a caller who comes runs it himself,
        with no handing over to this thread and back (that was a tenth of an isolated call).

        While callers run the loop this thread looks again every `LOOK`, and wants no word at
        each let-go (waking it costs the caller the GIL once: at every call of a quick
        succession, that was most of a call's cost). Only when one caller has held the loop
        across looks (one long call) does it look less often and ask to be told."""
        me = threading.get_ident()
        seen, timeout = -1, self.LOOK
        ready = False  # the last watch saw a descriptor or timer ready
        with self._lock:
            while True:
                if self._driver is None:
                    self._background_waits = False
                    if self._stopping:
                        self._driver = me
                        return None
                    if self._wanted:
                        self._driver = me
                        return _Turn.SERVE
                    if ready:
                        self._driver = me
                        return _Turn.ROUND
                    wait = self.LINGER - (time.monotonic() - self._freed)
                    if wait > 0:
                        self._background_turn.wait(wait)
                        continue
                    if not self._watchable:
                        self._driver = me
                        return _Turn.SERVE
                    ready = self._watch()
                    continue
                ready = False  # a caller runs it: whatever was ready is its to serve
                if self._drives == seen:  # the same caller's run since the last look
                    timeout = min(timeout * 2, 0.1)
                    self._background_waits = True
                else:
                    seen, timeout = self._drives, self.LOOK
                    self._background_waits = False
                self._background_turn.wait(timeout)

    def _watch(self) -> bool:
        """Called with the lock held and the loop free: wait, without the lock and without running
        the loop, until one of its descriptors is ready (the self-pipe of `call_soon_threadsafe`
        among them: every handover, submit and stop writes to it) or its next timer is due.
        True when something may be ready now."""
        loop: Any = self._loop
        if loop._ready:
            return True
        poller = select.poll()
        poller.register(self._kick_r, select.POLLIN)
        selector = loop._selector
        if isinstance(selector, _EPOLL):
            # An epoll descriptor is readable while one of its own is ready: one registration
            # watches them all (a served gateway has hundreds), as they are now.
            poller.register(selector.fileno(), select.POLLIN)
        else:
            # Read while nobody runs the loop (the lock is held and no driver is set): a caller
            # who takes it during the wait may change them, and is then the one to serve them.
            for key in list(selector.get_map().values()):
                mask = select.POLLIN if key.events & selectors.EVENT_READ else 0
                poller.register(key.fd, mask | (select.POLLOUT if key.events & selectors.EVENT_WRITE else 0))
        due = loop._scheduled[0].when() - loop.time() if loop._scheduled else None
        if due is not None and due <= 0:
            return True
        self._watching = True
        self._lock.release()
        try:
            poller.poll(None if due is None else math.ceil(due * 1000))
        finally:
            self._lock.acquire()
            self._watching = False
            with contextlib.suppress(BlockingIOError):
                os.read(self._kick_r, 64)
        return True

    def _take(self, me: int) -> None:
        """With the lock held and the loop free: `me` runs it now. A watch waiting on it is woken
        (by `_kick`, once the lock is released)."""
        self._driver = me
        self._drives += 1

    def _kick(self) -> None:
        """Without the lock: wake the watch if one was waiting when this thread took the loop."""
        if self._watching:
            with contextlib.suppress(BlockingIOError, OSError):  # full (already kicked) or closed
                os.write(self._kick_w, b"\0")

    def _shut(self) -> None:
        # Whatever still runs is cancelled, so no caller waits forever on a stopped loop.
        self._cleaning = True
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        with self._lock:
            self._loop.close()
            self._driver = None
            self._callers.notify_all()
            if self._kick_r >= 0:
                os.close(self._kick_r)
                os.close(self._kick_w)
                self._kick_r = self._kick_w = -1

    def _let_go(self, by_caller: bool = True) -> None:
        with self._lock:
            self._driver = None
            if by_caller:  # a caller's next call may come at once: the loop is left to it a while
                self._freed = time.monotonic()
            if self._followers:
                self._callers.notify_all()
            if self._background_waits or self._wanted or self._stopping:
                self._background_turn.notify()

    def _halt(self) -> None:
        """On the loop: end the current run, whoever runs it (the stop of the cleanup aside)."""
        if not self._cleaning:
            self._loop.stop()

    # ---- async callers -----------------------------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._stopping or self._loop.is_closed() or not self._thread.is_alive():
            coro.close()
            raise ToolExecutionError(CLOSED)
        with self._lock:
            self._wanted += 1
            if self._driver is None:
                self._background_turn.notify()
        # In an empty context: the caller's context variables (a served user's workspace context,
        # its cancel token) must not ride along onto the gateway's loop, where every task and
        # every message the SDK's streams carry would keep them alive.
        try:
            future = contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, self._loop)
        except RuntimeError:  # closed between the check and the handoff
            self._unwant()
            coro.close()
            raise ToolExecutionError(CLOSED) from None
        future.add_done_callback(self._unwant)
        return future

    def _unwant(self, _: object = None) -> None:
        with self._lock:
            self._wanted -= 1
            done = not self._wanted
        # The async work the background thread holds the loop for is done (this runs on the loop
        # when the work ends there): after LINGER with none new, back to watching, so that a
        # synchronous caller runs it himself. Not at once: async callers (a served gateway's)
        # come in quick successions too, and a loop held needs no wake-up for the next.
        if not (done and self._serving and self._watchable):
            return
        if self.on_loop_thread():
            self._loop.call_later(self.LINGER, self._unhold)
        else:
            # The work ended before its callback was attached, so the callback runs here, in
            # the caller's thread: without this the loop stayed held until the next work came.
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._loop.call_later, self.LINGER, self._unhold)

    def _unhold(self) -> None:
        if self._serving and not self._wanted:
            self._loop.stop()

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the gateway loop from any other event loop (asyncio or trio)."""
        if self.on_loop_thread():
            return await coro
        future = self.submit(coro)
        try:
            if _in_asyncio():
                return await asyncio.wrap_future(future)
            try:
                return await anyio.to_thread.run_sync(future.result)
            finally:
                future.cancel()
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            if self._stopping and future.cancelled():  # the gateway closed under the call
                raise ToolExecutionError(CLOSED_DURING) from None
            raise  # our caller was cancelled: propagate as such

    # ---- synchronous callers -----------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the gateway loop and wait for it from this (synchronous) thread, in an
        empty context (as `submit`'s tasks are)."""
        if self.on_loop_thread():
            coro.close()
            raise ToolExecutionError(
                "a synchronous MCP gateway call was made from the gateway's own loop; use the async API"
            )
        if self._stopping or self._loop.is_closed() or not self._thread.is_alive():
            coro.close()
            raise ToolExecutionError(CLOSED)
        if asyncio.events._get_running_loop() is not None:
            # This thread runs a loop of its own: it may only wait, never run ours.
            try:
                return self.submit(coro).result()
            except concurrent.futures.CancelledError:
                raise ToolExecutionError(CLOSED_DURING) from None
        call: _Call[T] = _Call()
        me = threading.get_ident()
        with self._lock:
            leading = self._driver is None and not self._stopping
            if leading:
                self._take(me)
        if leading:
            self._kick()
            self._start(call, coro)
            self._lead(call)
        else:
            self._hand_over(call, coro)
            self._follow(call, me)
        task = call.task
        if task is None or task.cancelled():
            raise ToolExecutionError(CLOSED_DURING)
        return task.result()

    def _start(self, call: _Call[T], coro: Coroutine[Any, Any, T]) -> None:
        """On the loop (held by this thread, or as a callback of whoever runs it): start `coro`
        for `call`."""
        if self._cleaning:
            coro.close()
            self._ended(call)
            return
        call.task = contextvars.Context().run(self._loop.create_task, coro)
        call.task.add_done_callback(lambda _: self._ended(call))

    def _ended(self, call: _Call[Any]) -> None:
        with self._lock:
            call.ended = True
            if self._followers:
                self._callers.notify_all()
        if call.led:
            self._loop.stop()
        # The background thread served a synchronous call: let the loop go, so the caller's
        # next call (often at once) runs it itself.
        if self._serving and not self._wanted:
            self._loop.stop()

    def _hand_over(self, call: _Call[T], coro: Coroutine[Any, Any, T]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._start, call, coro, context=contextvars.Context())
        except RuntimeError:  # closed between the check and the handoff
            coro.close()
            raise ToolExecutionError(CLOSED) from None

    def _follow(self, call: _Call[Any], me: int) -> None:
        """Wait for `call` to end; run the loop whenever it comes free before then. A Ctrl-C
        while waiting ends the call too (once started), as a leader's Ctrl-C does."""
        try:
            self._wait_or_lead(call, me)
        except KeyboardInterrupt:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing runs
                self._loop.call_soon_threadsafe(self._cancel, call)
            raise

    def _wait_or_lead(self, call: _Call[Any], me: int) -> None:
        while True:
            with self._lock:
                self._followers += 1
                try:
                    while not call.ended and (self._driver is not None or self._stopping):
                        if self._loop.is_closed():
                            return
                        self._callers.wait()
                finally:
                    self._followers -= 1
                if call.ended:
                    return
                self._take(me)
            self._kick()
            self._lead(call)

    def _lead(self, call: _Call[Any]) -> None:
        """Run the loop (taken by this thread) until `call` has ended, then let it go; a call
        handed over is started in this run. A stop ends the run early: the call is then waited
        for as a follower, and the cleanup ends it."""
        interrupted: list[bool] = []
        guard = threading.current_thread() is _MAIN and _signal.getsignal(_SIGINT) is _DEFAULT_INT
        if guard:

            def cancel(signum: int, frame: object) -> None:
                if interrupted:  # a second Ctrl-C: at once
                    raise KeyboardInterrupt
                interrupted.append(True)
                # Looked up on the loop, not here: a caller that took the loop over from
                # another may land here before its handed-over call has been started.
                self._loop.call_soon_threadsafe(self._cancel, call)

            _signal.signal(_SIGINT, cancel)
        call.led = True
        try:
            while not call.ended and not self._stopping:
                self._loop.run_forever()  # until the call ends (`_ended`), or a stop
        finally:
            call.led = False
            if guard:
                _signal.signal(_SIGINT, _DEFAULT_INT)
            self._let_go()
        if interrupted:
            raise KeyboardInterrupt
        if not call.ended:
            self._follow(call, threading.get_ident())

    @staticmethod
    def _cancel(call: _Call[Any]) -> None:
        if call.task is not None:
            call.task.cancel()

    # ---- stopping ----------------------------------------------------------------------------

    def stop(self) -> None:
        with self._lock:
            if self._stopping or self._loop.is_closed():
                return
            self._stopping = True
            self._background_turn.notify()
        try:
            self._loop.call_soon_threadsafe(self._halt)
        except RuntimeError:  # already closed
            return
        if threading.current_thread() is not self._thread and not self.on_loop_thread():
            self._thread.join()


def _in_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another async library (trio) runs this task
        return False
    return True
