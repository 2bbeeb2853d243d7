"""A policy's `approve` in served mode: the client that made the call is asked (issue 59).

A call a rule holds for a person runs once that call's client says yes:
- a handshake-era client is sent `elicitation/create` (form mode, nothing to fill in: accept,
  decline or cancel) on the call's own channel, as an upstream's question would be
  (serve/asking.py);
- a 2026-07-28 client gets the question as the call's `input_required` result, with a
  `requestState` sealed to this user, this tool and these very arguments, good for one retry;
  the retry carrying the answer runs the call (or is refused).
A client that cannot be asked (no elicitation capability; a handshake-era client on stateless
HTTP, which has no channel to ask on) gets the refusal saying approval is needed. Decline or
cancel refuses the call: nothing runs. The answer goes to the call's audit line beside the rule id.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolroute.allowlist import CallOutcome, OutcomeKind
from toolroute.asking import current_asker, own_question
from toolroute.policy.tools import DECISIONS, PolicedTool
from toolroute.serve.asking import PassInputRequired, _declared
from toolroute.serve.sealed import Sealer

if TYPE_CHECKING:
    from toolroute.allowlist import ExposedTools
    from toolroute.policy.rules import Verdict

QUESTION_KEY = "toolroute.approval"  # the key of toolroute's own question in `inputRequests`
ANSWER_SECONDS = 600  # how long a 2026-07-28 client's sealed question stays answerable
_PREFIX = "tra1"
# Nothing to fill in: the form is the question itself.
_FORM: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass
class Approval:
    """One served call's approval, current for the length of the call."""

    ctx: Any
    tool: str
    arguments: Mapping[str, Any] | None
    granted: bool = False  # an accepted answer came with this call (a 2026-07-28 retry)
    # What the client said (accept, decline, cancel); "asked" (by the call's result, the retry
    # answers), "unasked" (it cannot be asked); None while no rule held the call.
    answer: str | None = None
    rule: str | None = None  # the rule that held the call


_CURRENT: contextvars.ContextVar[Approval | None] = contextvars.ContextVar("toolroute_approval", default=None)


def current_approval() -> Approval | None:
    return _CURRENT.get()


class AskForApproval(PassInputRequired):
    """Raised through the served door: a 2026-07-28 client is asked by the call's result."""

    def __init__(self, question: types.ElicitRequest, rule: str | None) -> None:
        super().__init__({"resultType": "input_required"})
        self.question = question
        self.rule = rule


def question(tool: str, verdict: Verdict) -> types.ElicitRequest:
    message = f"Allow the call to {tool!r}? {verdict.reason}"
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=_FORM))


# ---- the sealed state of a 2026-07-28 client's question -------------------------------------

# Its own sealer, apart from the others: an upstream's state, sealed and handed to a client,
# can never pass for an approval.
_SEALER = Sealer(_PREFIX, ANSWER_SECONDS)


def seal(ctx: Any, approval: Approval, *, granted: bool, inner: str | None = None) -> str:
    """This call's question (or, `granted`, its approval with an upstream's own sealed state
    `inner` to carry on) bound to the caller, tool and arguments, for a while."""
    return _SEALER.seal(ctx, approval.tool, approval.arguments, rule=approval.rule, granted=granted, inner=inner)


def peel(ctx: Any, params: types.CallToolRequestParams) -> tuple[Approval, types.CallToolRequestParams]:
    """The call's approval, and `params` without toolroute's own question and state (the
    upstream's own state, if an approved call carried one, is put back). MCPError for a state of
    ours not sealed for this caller, tool and arguments (another tenant's, forged, stale)."""
    approval = Approval(ctx, params.name, params.arguments)
    sealed = params.request_state
    if sealed is None or not _SEALER.owns(sealed):
        return approval, params
    refused = MCPError(code=types.INVALID_PARAMS, message="request_state is not valid for this call")
    payload = _SEALER.unseal(ctx, params.name, params.arguments, sealed, refused)
    responses = dict(params.input_responses or {})
    response = responses.pop(QUESTION_KEY, None)
    approval.rule = payload.get("rule")
    if payload.get("granted") is True:
        approval.granted, approval.answer = True, "accept"
    else:
        action = response.action if isinstance(response, types.ElicitResult) else "cancel"
        approval.granted, approval.answer = action == "accept", action
    inner = payload.get("inner")
    update = {"request_state": inner if isinstance(inner, str) else None, "input_responses": responses or None}
    return approval, params.model_copy(update=update)


class approving:  # a context manager, named as one
    """`approval` current for the length of a `with` block (a class: it runs on every call)."""

    __slots__ = ("_approval", "_token")

    def __init__(self, approval: Approval) -> None:
        self._approval = approval

    def __enter__(self) -> Approval:
        self._token = _CURRENT.set(self._approval)
        return self._approval

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)


def input_required(ctx: Any, approval: Approval, asked: AskForApproval) -> types.InputRequiredResult:
    """The question as a 2026-07-28 client's answer to its call."""
    return types.InputRequiredResult(
        input_requests={QUESTION_KEY: asked.question}, request_state=seal(ctx, approval, granted=False)
    )


def carried(
    ctx: Any, approval: Approval, result: types.InputRequiredResult | types.CallToolResult
) -> types.InputRequiredResult | types.CallToolResult:
    """An approved call's upstream asked in turn: its state goes back inside the approval, so the
    client's retry (with the upstream's answers) is not held again."""
    if not approval.granted or not isinstance(result, types.InputRequiredResult):
        return result
    return result.model_copy(update={"request_state": seal(ctx, approval, granted=True, inner=result.request_state)})


# ---- the door's side ------------------------------------------------------------------------


async def held(door: ExposedTools, name: str, arguments: dict[str, Any], outcome: CallOutcome) -> CallOutcome:
    """A call the policy held (`outcome`): asked of the client, and run if it said yes."""
    approval = _CURRENT.get()
    tool = door.exposure.get(name)
    if approval is None or not isinstance(tool, PolicedTool):
        return outcome
    verdict = tool.view.decide(arguments)
    if verdict.effect != "approve":
        return outcome
    approval.rule = verdict.rule
    if not approval.granted and approval.answer is None:
        answer = await _ask(approval, name, verdict)
        if answer is None:
            approval.answer = "unasked"
            text = f"{name!r} needs a person's approval, and this client cannot be asked: {verdict.reason}"
            return CallOutcome(text, OutcomeKind.APPROVAL_NEEDED)
        approval.answer = answer
        approval.granted = answer == "accept"
    if not approval.granted:
        text = f"the call to {name!r} was not approved (the user answered {approval.answer}): {verdict.reason}"
        return CallOutcome(text, OutcomeKind.REFUSED)
    noted = DECISIONS.get()
    mark = 0 if noted is None else len(noted)
    try:
        return await door.aexecute(name, arguments, approved=True)
    finally:
        if noted is not None:
            del noted[mark:]  # the same rule again: the audit line names it once


async def _ask(approval: Approval, name: str, verdict: Verdict) -> str | None:
    """The client's answer (accept, decline, cancel), or None when it cannot be asked."""
    asker = current_asker()
    if asker is None:
        return None
    asked = question(name, verdict)
    session = getattr(approval.ctx, "session", None)
    if getattr(session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        capabilities = session.client_capabilities or types.ClientCapabilities()  # type: ignore[union-attr]
        if not _declared(capabilities, asked):
            return None
        approval.answer = "asked"  # by the call's result; the retry brings the answer
        raise AskForApproval(asked, verdict.rule)
    with own_question():  # audited on the call's line (`approval`), not as an upstream's question
        answer = await asker.ask(asked)
    return answer.action if isinstance(answer, types.ElicitResult) else None
