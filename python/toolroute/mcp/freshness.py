"""Caching hints (2026-07-28, SEP-2549: `ttlMs`, `cacheScope`) of what upstream servers list, and
what they make together.

A 2026-07-28 server says how long its listing stays fresh and whether a shared cache may serve it
to any user (`public`) or only to the caller (`private`). A listing made of several servers'
parts is as fresh as its least fresh part and public only if every part is; a part that said
nothing (a handshake-era server, toolroute's own tools) is what a client assumes of a result
without hints: stale at once, the caller's only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal


@dataclass(frozen=True)
class Freshness:
    ttl_ms: int = 0
    public: bool = False

    def __and__(self, other: Freshness) -> Freshness:
        return Freshness(min(self.ttl_ms, other.ttl_ms), self.public and other.public)

    def private(self) -> Freshness:
        """The same freshness for one caller's view (a per-user listing is never shared)."""
        return replace(self, public=False)

    @property
    def scope(self) -> Literal["public", "private"]:
        return "public" if self.public else "private"

    def fields(self) -> dict[str, Any]:
        """As a cacheable result's model fields (`ttl_ms`, `cache_scope`)."""
        return {"ttl_ms": self.ttl_ms, "cache_scope": self.scope}


UNKNOWN = Freshness()  # no hint: immediately stale, private


def of_result(result: Any) -> Freshness:
    """The hints one result carried (set on the wire, not the model's defaults)."""
    if "ttl_ms" not in getattr(result, "model_fields_set", ()):
        return UNKNOWN
    ttl = getattr(result, "ttl_ms", 0)
    return Freshness(max(0, ttl) if isinstance(ttl, int) else 0, getattr(result, "cache_scope", None) == "public")


def combined(parts: Iterable[Freshness]) -> Freshness:
    """The freshness of a listing made of `parts` (none: UNKNOWN)."""
    found: Freshness | None = None
    for part in parts:
        found = part if found is None else found & part
    return UNKNOWN if found is None else found
