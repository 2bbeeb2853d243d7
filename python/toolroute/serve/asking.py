"""A served call's client as the one who answers its upstream server's questions.

During a `tools/call`, an upstream server may ask for a form, a URL to open or a completion
(toolroute/asking.py). In served mode the question goes to the served client whose request it
is, as a request of the served session on that request's own channel (so on HTTP it rides that
call's response stream, never another client's), and the client's answer, decline or cancel goes
back. A 2026-07-28 client (its era has no server-to-client requests) is asked through its call's
result: a 2026-07-28 upstream's `input_required` is passed back to it, and a handshake-era
upstream's question is bridged to it (serve/bridge.py). A client that did not declare the
capability, or a session that cannot send requests, is not asked: the server is refused as a
client without the capability refuses it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolroute.asking import Answer, Ask, Asker, Deferred, Question, kind_of, unsupported
from toolroute.serve.sealed import who

log = logging.getLogger("toolroute.serve")


def is_modern(ctx: Any) -> bool:
    """Whether served request `ctx` is a 2026-07-28 client's (asked only through results)."""
    return getattr(getattr(ctx, "session", None), "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def served_asker(ctx: Any, params: Any = None, bridged: Ask | None = None) -> Asker | None:
    """The asker of served request `ctx` (None outside a request). A
    2026-07-28 client is asked by returning the questions to it (`Deferred`); its retry's
    `request_state` must be one this server sealed for this user and tool (else refused). A
    handshake-era upstream's question to it goes to `bridged` (serve/bridge.py; None: refused)."""
    session = getattr(ctx, "session", None)
    if session is None:
        return None
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return _deferring(ctx, session, params, bridged)
    # Asked only what it declared, and only where its answer has somewhere to land; its log
    # messages need neither (they ride the request's own channel).
    capabilities = session.client_capabilities or types.ClientCapabilities()
    can_ask = bool(getattr(session, "can_send_request", False))
    related = ServerMessageMetadata(related_request_id=ctx.request_id)

    async def ask(question: Question) -> Answer:
        if not can_ask or not _declared(capabilities, question):
            return unsupported(question)
        log.info("passing %s from an upstream server to the client of request %s", kind_of(question), ctx.request_id)
        result_type: Any = types.ElicitResult
        if isinstance(question, types.ListRootsRequest):
            result_type = types.ListRootsResult
        elif isinstance(question, types.CreateMessageRequest):
            wants_tools = question.params.tools is not None or question.params.tool_choice is not None
            result_type = types.CreateMessageResultWithTools if wants_tools else types.CreateMessageResult
        try:
            answer: Answer = await session.send_request(_handshake_era(question), result_type, metadata=related)
        except MCPError as exc:  # the client refused: the server hears the same
            return exc.error
        return answer

    async def tell(message: types.LoggingMessageNotificationParams) -> None:
        await session.send_log_message(
            level=message.level, data=message.data, logger=message.logger, related_request_id=ctx.request_id
        )

    # The client connection behind the request (it outlives the request's own session object).
    owner = getattr(session, "_connection", session)
    return Asker(ask, owner=owner, loop=asyncio.get_running_loop(), log=tell)


def _handshake_era(question: Question) -> Question:
    """`question` as its era requires: a URL elicitation of a 2026-07-28 upstream (that revision
    removed `elicitationId`) gets an id of its own, which 2025-11-25 requires (its client refuses
    one without). No `notifications/elicitation/complete` will name it: such an upstream sends none."""
    params = question.params
    if not isinstance(params, types.ElicitRequestURLParams) or params.elicitation_id is not None:
        return question
    update = {"elicitation_id": f"toolroute-{secrets.token_hex(8)}"}
    return question.model_copy(update={"params": params.model_copy(update=update)})


def _declared(capabilities: types.ClientCapabilities, question: Question) -> bool:
    """Whether the client said it can answer this: a bare `elicitation: {}` means forms only."""
    if isinstance(question, types.CreateMessageRequest):
        return capabilities.sampling is not None
    if isinstance(question, types.ListRootsRequest):
        return capabilities.roots is not None
    elicitation = capabilities.elicitation
    if elicitation is None:
        return False
    if getattr(question.params, "mode", None) == "url":
        return elicitation.url is not None
    return elicitation.form is not None or elicitation.url is None


# ---- 2026-07-28 clients: the upstream's `input_required` passed back, its state sealed ----------

# The key that seals the upstream's state in what a client is handed: per process, so a retry
# reaches the replica that sealed it or is refused (docs/mcp.md).
_KEY = secrets.token_bytes(32)


class PassInputRequired(Exception):
    """Raised through the served door: the call's answer is the upstream's `input_required`."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("input required")
        self.result = result


def seal(ctx: Any, tool: str, state: str | None) -> str:
    """The upstream's `state` bound to this caller and tool, tamper-evident."""
    payload = json.dumps({"who": who(ctx), "tool": tool, "state": state}, separators=(",", ":"))
    body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
    mac = hmac.new(_KEY, body.encode(), hashlib.sha256).hexdigest()
    return f"tr1.{body}.{mac}"


def unseal(ctx: Any, tool: str, sealed: str) -> str | None:
    """The upstream's state from a client's retry; MCPError when it was not sealed here for this
    caller and tool (another tenant's, another call's, forged)."""
    refused = MCPError(code=types.INVALID_PARAMS, message="request_state is not valid for this call")
    version, _, rest = sealed.partition(".")
    body, _, mac = rest.partition(".")
    expected = hmac.new(_KEY, body.encode(), hashlib.sha256).hexdigest()
    if version != "tr1" or not hmac.compare_digest(mac, expected):
        raise refused
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    if payload.get("who") != who(ctx) or payload.get("tool") != tool:
        raise refused
    state = payload.get("state")
    return state if isinstance(state, str) else None


def _deferring(ctx: Any, session: Any, params: Any, bridged: Ask | None) -> Asker:
    tool = getattr(params, "name", "")
    sealed = getattr(params, "request_state", None)
    responses = getattr(params, "input_responses", None)
    state = None if sealed is None else unseal(ctx, tool, sealed)
    dumped = None
    if responses:
        dumped = {k: v.model_dump(by_alias=True, mode="json", exclude_none=True) for k, v in responses.items()}

    capabilities = session.client_capabilities or types.ClientCapabilities()

    async def ask(question: Question) -> Answer:
        # Its era has no requests to the client: a handshake-era upstream's request mid-call is
        # handed to it in the call's result, where the call is bridged.
        if bridged is None or not _declared(capabilities, question):
            return unsupported(question)
        log.info("bridging %s from an upstream server to the 2026-07-28 client of its call", kind_of(question))
        return await bridged(question)

    owner = getattr(session, "_connection", session)
    return Asker(ask, owner=owner, loop=asyncio.get_running_loop(), deferred=Deferred(dumped, state))


def input_required(ctx: Any, tool: str, passed: PassInputRequired) -> types.InputRequiredResult | types.CallToolResult:
    """What the client gets for an upstream's `input_required`: the questions it declared it can
    answer, and the upstream's state sealed; else an error result saying what was asked."""
    result = types.InputRequiredResult.model_validate(passed.result)
    capabilities = ctx.session.client_capabilities or types.ClientCapabilities()
    for request in (result.input_requests or {}).values():
        if not isinstance(
            request, (types.ElicitRequest, types.CreateMessageRequest, types.ListRootsRequest)
        ) or not _declared(capabilities, request):
            what = (
                kind_of(request) if isinstance(request, (types.ElicitRequest, types.CreateMessageRequest)) else "roots"
            )
            text = f"the tool's server asked for {what}, which this client did not declare it can give"
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    return types.InputRequiredResult(
        input_requests=result.input_requests, request_state=seal(ctx, tool, result.request_state)
    )
