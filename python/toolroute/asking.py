"""Who answers the questions an upstream MCP server asks during a call.

An upstream server may ask its client something in the middle of a `tools/call`: a form or a URL
to open (elicitation), a completion from the client's model (sampling). Through the gateway, the
client is whoever made the call: in served mode the served client whose request it is, in the
library a callback the host gave the gateway. The served door (or the host) makes an `Asker` for
the call and makes it current (`asking`); the gateway reads it before its hop to its own loop, as
it reads the progress sink, and the upstream connection puts the server's questions to it, and
only to it (mcp/connection.py decides which call a question belongs to).

An `Asker` is called from the gateway's loop and runs its `ask` on the loop that owns the
client's session (they differ in served mode), so a question waits for its answer without
holding either loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mcp_types as types

Question = types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest
Answer = (
    types.ElicitResult
    | types.CreateMessageResult
    | types.CreateMessageResultWithTools
    | types.ListRootsResult
    | types.ErrorData
)
Ask = Callable[[Question], Awaitable[Answer]]
Log = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]

_log = logging.getLogger("toolroute.asking")


def unsupported(question: Question) -> types.ErrorData:
    """The answer of a client that cannot be asked: the SDK's own, as if it had no callback."""
    if isinstance(question, types.ListRootsRequest):
        return types.ErrorData(code=types.INVALID_REQUEST, message="List roots not supported")
    what = "Elicitation" if isinstance(question, types.ElicitRequest) else "Sampling"
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"{what} not supported")


@dataclass(frozen=True)
class Deferred:
    """A 2026-07-28 client, asked the way its era asks: a 2026-07-28 upstream's `input_required`
    goes back to it as the call's result, and its retry brings `responses` to the upstream's
    questions and the upstream's own `state` (verified by the served door first)."""

    responses: dict[str, Any] | None = None
    state: str | None = None


class Asker:
    """The client of one call (or of every call of a library host): `ask` puts a question to it.

    `owner` says whose client it is (a served session, a host's gateway): two calls of the same
    owner may share a question's route when the wire cannot say which call asked; two owners
    never do. `deferred`: the client is asked by returning the upstream's questions to it."""

    __slots__ = ("_ask", "_log", "_loop", "deferred", "owner")

    def __init__(
        self,
        ask: Ask,
        *,
        owner: object,
        loop: asyncio.AbstractEventLoop | None = None,
        deferred: Deferred | None = None,
        log: Log | None = None,
    ) -> None:
        self._ask = ask
        self.owner = owner
        self._loop = loop
        self.deferred = deferred
        self._log = log

    def tell(self, message: types.LoggingMessageNotificationParams) -> None:
        """Hand a server's log message of the call on to the client, without waiting: a slow
        client must not hold the upstream connection's reader (which other calls share)."""
        if self._log is None:
            return
        loop = self._loop or asyncio.get_running_loop()
        with contextlib.suppress(RuntimeError):  # the client's loop is gone: nobody listens now
            asyncio.run_coroutine_threadsafe(self._told(message), loop)

    async def _told(self, message: types.LoggingMessageNotificationParams) -> None:
        assert self._log is not None
        try:
            await self._log(message)
        except Exception as exc:  # a client that went away: the call itself goes on
            _log.debug("log message not delivered: %s", exc)

    async def ask(self, question: Question) -> Answer:
        """The client's answer (an `ErrorData` when it refused or cannot answer), from any loop."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop():
            return await self._ask(question)
        try:
            future = asyncio.run_coroutine_threadsafe(self._answer(question), loop)
        except RuntimeError:  # the client's loop is gone: nobody can answer now
            return unsupported(question)
        # Cancelling this call (its deadline, the client's cancel) cancels the question too.
        return await asyncio.wrap_future(future)

    async def _answer(self, question: Question) -> Answer:
        return await self._ask(question)

    def observed(self, note: Callable[[Question, Answer | None, float], None]) -> Asker:
        """This client, with each question, its answer (None: it never came, the call ended
        first) and when it was asked (`time.monotonic()`) handed to `note` on the client's loop."""
        inner = self._ask

        async def ask(question: Question) -> Answer:
            if _own.get():  # toolroute's own question (a policy's approval): not an upstream's
                return await inner(question)
            asked = time.monotonic()
            try:
                answer = await inner(question)
            except BaseException:
                note(question, None, asked)
                raise
            note(question, answer, asked)
            return answer

        return Asker(ask, owner=self.owner, loop=self._loop, deferred=self.deferred, log=self._log)


_current: contextvars.ContextVar[Asker | None] = contextvars.ContextVar("toolroute_asker", default=None)
# Set while toolroute asks a question of its own through the call's asker (served mode's approval):
# an upstream's questions arrive from the gateway's loop, never in this context.
_own: contextvars.ContextVar[bool] = contextvars.ContextVar("toolroute_own_question", default=False)


@contextlib.contextmanager
def own_question() -> Iterator[None]:
    """Mark the questions asked in this block as toolroute's own (`Asker.observed` skips them)."""
    token = _own.set(True)
    try:
        yield
    finally:
        _own.reset(token)


def current_asker() -> Asker | None:
    """The asker of the call running in this context, if its client can be asked."""
    return _current.get()


@contextlib.contextmanager
def asking(asker: Asker | None) -> Iterator[None]:
    """Make `asker` the current call's (worker threads started inside inherit it)."""
    token = _current.set(asker)
    try:
        yield
    finally:
        _current.reset(token)


def kind_of(question: Question) -> str:
    """What is asked, for messages and the audit: `elicitation (form)`, `elicitation (url)`,
    `sampling`, `roots`."""
    if isinstance(question, types.CreateMessageRequest):
        return "sampling"
    if isinstance(question, types.ListRootsRequest):
        return "roots"
    mode = getattr(question.params, "mode", None) or "form"
    return f"elicitation ({mode})"
