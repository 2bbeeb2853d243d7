"""One audit line per question an upstream server puts to a served client during a call (issue
60): who, which upstream server, through which tool, what kind, and how it ended (the answer's
action: `accept`, `decline`, `cancel`; `answered` for sampling and roots; `refused`; `cancelled`
when the call ended first; `input_required` when a 2026-07-28 client was handed it to answer on
its retry). Never the question's text or the answer's content."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from toolroute.asking import Answer, Asker, Question, kind_of
from toolroute.serve.audit import AuditLog

LEVEL = "question"


def outcome_of(answer: Answer | None) -> str:
    if answer is None:
        return "cancelled"
    if isinstance(answer, types.ErrorData):
        return "refused"
    if isinstance(answer, types.ElicitResult):
        return answer.action
    return "answered"


def audited(asker: Asker, audit: AuditLog, user: str | None, tool: str, server: str | None) -> Asker:
    """`asker`, each of whose questions leaves its audit line once answered (or not)."""

    def note(question: Question, answer: Answer | None, asked: float) -> None:
        audit.record(
            user=user,
            tool=tool,
            started=asked,
            outcome=outcome_of(answer),
            result_chars=0,
            arguments=None,
            level=LEVEL,
            server=server,
            question=kind_of(question),
        )

    return asker.observed(note)


def _kind_of_wire(request: Any) -> str:
    """The kind of one `input_required` request in wire form (a 2026-07-28 upstream's)."""
    method = request.get("method") if isinstance(request, Mapping) else None
    if method == "elicitation/create":
        params = request.get("params") or {}
        return f"elicitation ({params.get('mode') or 'form'})"
    if method == "sampling/createMessage":
        return "sampling"
    if method == "roots/list":
        return "roots"
    return str(method)[:64]


def audit_passed_back(
    audit: AuditLog, user: str | None, tool: str, server: str | None, result: Mapping[str, Any]
) -> None:
    """A 2026-07-28 upstream's questions handed to the client in the call's result: one line each."""
    started = time.monotonic()
    requests = result.get("inputRequests") or {}
    for request in requests.values() if isinstance(requests, Mapping) else ():
        audit.record(
            user=user,
            tool=tool,
            started=started,
            outcome="input_required",
            result_chars=0,
            arguments=None,
            level=LEVEL,
            server=server,
            question=_kind_of_wire(request),
        )
