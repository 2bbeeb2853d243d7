"""Answers handed to the SDK in their wire form, past its validate-and-dump of each result.

The SDK's server dumps a handler's result model, validates the dump against the negotiated
protocol version's schema and dumps it again (`ServerRunner._serialize`): for a listing of 500
tools that is ~25 ms per `tools/list`, for a call a third of its CPU. A handler here may instead
answer a result already in wire form (`answer_with`): the SDK then serialises only a placeholder
(an empty result of the same method, so its envelope, `resultType`, the `serverInfo` stamp in
`_meta` and any cache hints, stays the SDK's), and `prebuilt_results` (a server middleware) puts
the prebuilt fields in its place. The handler is still reached the SDK's way: handshake gate,
params validation and lookup all run.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from mcp.server.context import CallNext, HandlerResult
from mcp_types import SERVER_INFO_META_KEY

M = TypeVar("M")

PREBUILT_METHODS = frozenset({"tools/list", "tools/call"})

# One request's slot, set by the middleware around its handler (same task, so same context).
_SLOT: ContextVar[list[Mapping[str, Any]] | None] = ContextVar("toolroute_prebuilt", default=None)


def answer_with(wire: Mapping[str, Any], placeholder: M, fallback: M) -> M:
    """From a `tools/list` or `tools/call` handler: answer `wire` (fields in the negotiated
    version's wire form) with `placeholder`'s envelope; `fallback` (the same answer as a model)
    where no middleware waits for it (a server built without `prebuilt_results`)."""
    slot = _SLOT.get()
    if slot is None:
        return fallback
    slot.append(wire)
    return placeholder


def merged(envelope: Mapping[str, Any], wire: Mapping[str, Any]) -> dict[str, Any]:
    """`wire`'s fields in `envelope`: the SDK's `_meta` keys (its serverInfo stamp) win over the
    answer's own, and an upstream's own stamp is not passed on (this server answers)."""
    out = {**envelope, **wire}
    meta = {k: v for k, v in (wire.get("_meta") or {}).items() if k != SERVER_INFO_META_KEY}
    meta.update(envelope.get("_meta") or {})
    if meta:
        out["_meta"] = meta
    else:
        out.pop("_meta", None)
    return out


async def prebuilt_results(ctx: Any, call_next: CallNext) -> HandlerResult:
    """Server middleware (innermost): the prebuilt answer of a handler that gave one."""
    if ctx.method not in PREBUILT_METHODS or ctx.request_id is None:
        return await call_next(ctx)
    slot: list[Mapping[str, Any]] = []
    token = _SLOT.set(slot)
    try:
        envelope = await call_next(ctx)
    finally:
        _SLOT.reset(token)
    if not slot or not isinstance(envelope, Mapping):
        return envelope
    return merged(envelope, slot[0])
