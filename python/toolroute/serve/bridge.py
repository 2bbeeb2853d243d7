"""A handshake-era upstream's question to a 2026-07-28 client, bridged across its retries (issue 60).

A handshake-era upstream asks mid-call with a request of its own (`elicitation/create`,
`sampling/createMessage`, `roots/list`) and waits for the answer with its call open. A 2026-07-28
client is asked only through its call's result (`input_required`) and answers by retrying the
call. So a 2026-07-28 client's call runs in a task of its own (`Bridge`), apart from the request
that made it: when its upstream asks, the running call is parked with the upstream's pending
question (in memory, in this process), the client's request is answered `input_required` with the
question and a sealed `requestState` that names the park, and the client's retry resumes it: the
answer (a decline, a cancel) goes to the upstream's pending request, and the retry waits for the
call's end or its next question (another `input_required`).

Bounds: at most MAX_PARKED parked calls per caller (past it, a question is refused to the
upstream as a client without the capability would); a park lasts no longer than its call (the
call's deadline ends the call, its question with it, and the park) and at most ANSWER_SECONDS. A
retry whose park has ended, that another tenant was handed, or that another process parked (the
key and the parks are this process's: replicas need sticky routing) is refused, saying so.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Coroutine, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolroute.asking import Answer, Question, kind_of
from toolroute.serve.sealed import Sealer, who

log = logging.getLogger("toolroute.serve")

MAX_PARKED = 16  # parked calls per caller (each holds an upstream call and its concurrency slot)
ANSWER_SECONDS = 600  # the longest a park waits, whatever its call's deadline
KEY_PREFIX = "toolroute.upstream."  # the keys of bridged questions in `inputRequests`
_SEALER = Sealer("trb1", ANSWER_SECONDS)


def is_bridged(state: str | None) -> bool:
    """Whether a retry's `requestState` names a parked call (one of ours, or claims to)."""
    return _SEALER.owns(state)


def _gone() -> MCPError:
    return MCPError(
        code=types.INVALID_PARAMS,
        message=(
            "request_state names no call waiting here for an answer: its call has ended (its deadline "
            "passed), or another toolroute process holds it (replicas need sticky routing for "
            "bridged questions)"
        ),
    )


class Bridge:
    """One 2026-07-28 client's call, in a task of its own so that it can outlive the request that
    made it while its upstream waits for the client's answer (on the serving loop only)."""

    def __init__(self, ctx: Any, tool: str, arguments: Mapping[str, Any] | None) -> None:
        self.who = who(ctx)
        self.tool = tool
        self.arguments = arguments
        self.park: str | None = None  # the park's id, while parked
        self._task: asyncio.Task[Any] | None = None
        self._waiting: dict[str, tuple[Question, asyncio.Future[Answer]]] = {}  # asked, unanswered
        self._wake: asyncio.Future[None] | None = None
        self._asked = 0
        self._expiry: asyncio.TimerHandle | None = None
        self._ctx: Any = None  # the client's request waiting for the call now (none while parked)
        self._watched = False

    def start(self, call: Coroutine[Any, Any, Any]) -> None:
        self._task = asyncio.get_running_loop().create_task(self._running(call))

    async def _running(self, call: Coroutine[Any, Any, Any]) -> Any:
        try:
            return await call
        finally:
            # From inside the task, not a done callback: the waiting request wakes a loop turn
            # sooner (this runs on every call of a 2026-07-28 client).
            self._poke()

    async def ask(self, question: Question) -> Answer:
        """The upstream's question: handed to the client in its request's result, answered by its
        retry (or cancelled with the call)."""
        self._asked += 1
        key = f"{KEY_PREFIX}{self._asked}"
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting[key] = (question, future)
        self._poke()
        try:
            return await future
        finally:
            self._waiting.pop(key, None)

    async def outcome(self, ctx: Any) -> Any:
        """What the client's request gets: the call's own end, or its questions (`input_required`)."""
        task = self._task
        assert task is not None
        self._ctx = ctx
        try:
            while not task.done():
                if self._waiting:
                    parked = self._parked(ctx)
                    if parked is not None:
                        return parked
                    continue
                self._wake = asyncio.get_running_loop().create_future()
                try:
                    await self._wake
                except asyncio.CancelledError:
                    task.cancel()  # the client gave up on its call: the upstream hears it as a cancel
                    raise
            return task.result()
        finally:
            self._ctx = None

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        """The call's progress, to the request waiting for it now under that request's own
        progress token (none sent: none is reported); while parked nobody listens."""
        ctx = self._ctx
        if ctx is not None:
            await ctx.session.report_progress(progress, total, message)

    def answer(self, responses: Mapping[str, Any]) -> None:
        """A retry's answers, each to the upstream's pending question under its key (a question it
        left unanswered is handed to it again)."""
        for key, response in responses.items():
            waiting = self._waiting.pop(key, None)
            if waiting is not None and not waiting[1].done():
                waiting[1].set_result(_as_answer(waiting[0], response))

    def _parked(self, ctx: Any) -> types.InputRequiredResult | None:
        """Park the call and hand its questions to the client; None when the caller has as many
        parked as it may (its questions are refused to the upstream, and the call goes on)."""
        if not PARKED.add(self):
            log.warning("%d calls of one caller wait for answers already: an upstream's question refused", MAX_PARKED)
            refusal = types.ErrorData(code=types.INVALID_REQUEST, message="too many questions wait for this user")
            for _, future in self._waiting.values():
                if not future.done():
                    future.set_result(refusal)
            self._waiting.clear()
            return None
        self._expiry = asyncio.get_running_loop().call_later(ANSWER_SECONDS, self._expire)
        if not self._watched:  # its end seen even while parked, from its first park on
            self._watched = True
            assert self._task is not None
            self._task.add_done_callback(self._ended)
        kinds = ", ".join(kind_of(question) for question, _ in self._waiting.values())
        log.info("parked a call to %r: its upstream asks its 2026-07-28 client for %s", self.tool, kinds)
        requests: dict[str, Any] = {key: question for key, (question, _) in self._waiting.items()}
        state = _SEALER.seal(ctx, self.tool, self.arguments, park=self.park)
        return types.InputRequiredResult(input_requests=requests, request_state=state)

    def unparked(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def _expire(self) -> None:
        log.info("a parked call to %r waited %ds for its client's answer: cancelled", self.tool, ANSWER_SECONDS)
        PARKED.drop(self)
        if self._task is not None:
            self._task.cancel()

    def _ended(self, task: asyncio.Task[Any]) -> None:
        """A parked call's end (a call that was parked once: a retry may wait for it since)."""
        if self.park is not None:  # no client waits for it: it ended while parked (its deadline)
            log.info("a parked call to %r ended before its client answered", self.tool)
            PARKED.drop(self)
            if not task.cancelled():
                task.exception()  # retrieved: nobody will read it

    def _poke(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)


class Parks:
    """The calls parked in this process, by park id, and how many each caller has."""

    def __init__(self) -> None:
        self._parks: dict[str, Bridge] = {}
        self._counts: dict[str, int] = {}

    def add(self, bridge: Bridge) -> bool:
        if self._counts.get(bridge.who, 0) >= MAX_PARKED:
            return False
        bridge.park = secrets.token_hex(16)
        self._parks[bridge.park] = bridge
        self._counts[bridge.who] = self._counts.get(bridge.who, 0) + 1
        return True

    def take(self, park: object) -> Bridge | None:
        bridge = self._parks.get(park) if isinstance(park, str) else None
        if bridge is not None:
            self.drop(bridge)
        return bridge

    def drop(self, bridge: Bridge) -> None:
        if bridge.park is None or self._parks.pop(bridge.park, None) is None:
            return
        bridge.park = None
        bridge.unparked()
        left = self._counts.get(bridge.who, 1) - 1
        if left > 0:
            self._counts[bridge.who] = left
        else:
            self._counts.pop(bridge.who, None)

    def __len__(self) -> int:
        return len(self._parks)


PARKED = Parks()


def resume(ctx: Any, params: types.CallToolRequestParams) -> Bridge:
    """The parked call a client's retry answers, its answers delivered; MCPError when there is
    none here for this caller, tool and arguments (ended, another tenant's, another process's)."""
    sealed = params.request_state
    assert sealed is not None
    payload = _SEALER.unseal(ctx, params.name, params.arguments, sealed, _gone())
    bridge = PARKED.take(payload.get("park"))
    if bridge is None:
        raise _gone()
    bridge.answer(params.input_responses or {})
    return bridge


def _as_answer(question: Question, response: Any) -> Answer:
    """The client's response as the answer the upstream's request expects (else a refusal)."""
    expected: tuple[type[Any], ...]
    if isinstance(question, types.ElicitRequest):
        expected = (types.ElicitResult,)
    elif isinstance(question, types.ListRootsRequest):
        expected = (types.ListRootsResult,)
    elif question.params.tools is not None or question.params.tool_choice is not None:
        expected = (types.CreateMessageResultWithTools,)
    else:
        expected = (types.CreateMessageResult, types.CreateMessageResultWithTools)
    if isinstance(response, expected):
        return response
    wire = response.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(response, "model_dump") else {}
    try:
        return expected[0].model_validate(wire)
    except ValidationError:
        message = f"the client's answer is no {kind_of(question)} answer"
        return types.ErrorData(code=types.INVALID_PARAMS, message=message)
