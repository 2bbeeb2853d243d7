"""The calls in progress on one upstream connection, and to whose client each question goes.

An upstream server's question (elicitation, sampling) during a call must reach the client of
that call and no other: on a server shared by tenants, another tenant's client must never see
it. Which call a question belongs to:
- the call whose own request stream carried it, when the transport says so (streamable HTTP sends
  a call's questions on that call's response stream, and the SDK hands them on in the context of
  the call that sent the request);
- else (stdio, SSE, a server's standalone stream) the one client making calls on this connection
  now, if only one is: calls of two clients at once leave the question unanswerable, and it is
  refused as a client without the capability refuses it.
A question waits at most as long as its call: when the call ends (its deadline, a cancel), the
questions it left unanswered are cancelled.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

import anyio
import mcp_types as types

from toolroute.asking import Answer, Asker, Question, kind_of, unsupported
from toolroute.errors import ToolExecutionError, UpstreamInputRequired, UpstreamRequestError
from toolroute.textsafety import neutralize

log = logging.getLogger("toolroute.mcp")


class CallInProgress:
    """One call on a connection, and its client (`asker`, None when it cannot be asked)."""

    __slots__ = ("_scopes", "_token", "asked", "asker", "ended")

    def __init__(self, asked: Asked, asker: Asker | None) -> None:
        self.asked = asked
        self.asker = asker
        self.ended = False
        self._scopes: set[anyio.CancelScope] = set()
        self._token: contextvars.Token[CallInProgress | None] | None = None

    # In progress for the length of a `with` block (the request is sent inside it). A class,
    # not a generator: this runs on every call (a generator-based one costs about 3 us more).
    def __enter__(self) -> CallInProgress:
        self.asked._calls.add(self)
        self._token = _HERE.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _HERE.reset(self._token)
        self.asked._calls.discard(self)
        self.end()

    @property
    def owner(self) -> object:
        """Whose client answers: calls without one are each their own."""
        return self if self.asker is None else self.asker.owner

    async def put(self, question: Question) -> Answer:
        """The client's answer, or a refusal when it cannot answer or the call ended first."""
        if self.asker is None or self.ended:
            return unsupported(question)
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                return await self.asker.ask(question)
            finally:
                self._scopes.discard(scope)
        return types.ErrorData(code=types.REQUEST_TIMEOUT, message="the call that asked has ended")

    def end(self) -> None:
        self.ended = True
        for scope in list(self._scopes) if self._scopes else ():
            scope.cancel()


# The call this task (or a task the SDK runs in its context) is making, whichever connection.
_HERE: contextvars.ContextVar[CallInProgress | None] = contextvars.ContextVar("toolroute_mcp_call", default=None)


class Asked:
    """The calls in progress on one connection (on the gateway's loop only)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._calls: set[CallInProgress] = set()

    def call(self, asker: Asker | None) -> CallInProgress:
        """A call, in progress for the length of a `with` block."""
        return CallInProgress(self, asker)

    def route(self) -> CallInProgress | None:
        """The call a question that just arrived belongs to, if that can be told."""
        here = _HERE.get()
        if here is not None and here.asked is self:
            return here
        owners = {call.owner for call in self._calls}
        if len(owners) == 1:
            return next(iter(self._calls))
        return None

    async def put(self, question: Question) -> Answer:
        """A question the server sent as a request of its own (the handshake era's way)."""
        call = self.route()
        if call is None:
            key = getattr(self._connection, "key", "?")
            log.info("MCP server %r asked for %s outside any one client's call: refused", key, kind_of(question))
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{kind_of(question).capitalize()} not supported here: no single call in progress to ask for",
            )
        return await call.put(question)

    def tell(self, message: types.LoggingMessageNotificationParams) -> None:
        """A log message the server sent (the handshake era's `notifications/message`): to the
        client of the call it belongs to, routed as questions are; else dropped."""
        call = self.route()
        if call is not None and call.asker is not None and not call.ended:
            call.asker.tell(message)


def url_required(server: str, tool: str | None, error: types.ErrorData) -> UpstreamRequestError:
    """A -32042 error: the user must open a URL before the call can go on. A served client gets it
    with its code and URLs; a model reads where to send its user."""
    data = error.data if isinstance(error.data, dict) else {}
    urls = [e.get("url") for e in data.get("elicitations") or () if isinstance(e, dict) and e.get("url")]
    where = "; ".join(neutralize(str(u)) for u in urls) or "(no URL given)"
    message = f"MCP server {server!r} needs the user to open a URL before this call can proceed: {where}"
    return UpstreamRequestError(message, tool=tool, error=error.model_dump(mode="json", exclude_none=True))


def input_needed(server: str, name: str, request: Any, answer: types.ErrorData) -> ToolExecutionError:
    """A 2026-07-28 server's input request that this call's client did not answer."""
    what = kind_of(request) if isinstance(request, (types.ElicitRequest, types.CreateMessageRequest)) else "roots"
    return ToolExecutionError(
        f"MCP server {server!r} asked for {what} during the call to {name!r}, which was not given: "
        f"{neutralize(answer.message)}"
    )


def input_deferred(server: str, name: str, result: types.InputRequiredResult) -> UpstreamInputRequired:
    """A 2026-07-28 upstream's `input_required` for a client that answers by retrying."""
    return UpstreamInputRequired(
        f"MCP server {server!r} needs the user's input before {name!r} can proceed",
        result=result.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
