"""A state handed to a 2026-07-28 client in a call's `input_required`, for its retry to bring back.

The client holds it between its requests, so it is sealed: an HMAC under a key of this process
(and of this use: each `Sealer` has its own, so one kind of state never passes for another), over
the caller, the tool and the arguments it was issued for and a time it is good until. Each sealed
state answers one retry: a second with the same one is refused (a replay). The key is this
process's, so with replicas a retry must reach the replica that sealed it (docs/mcp.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from toolroute.serve.auth import request_user

_SPENT: dict[str, int] = {}  # the states answered, until they expire anyway
_SPENT_LOCK = threading.Lock()
_MAX_SPENT = 4096


def who(ctx: Any) -> str:
    """Whose call it is: the verified user (served mode with auth); without auth the server has
    one user (a 2026-07-28 client has no connection that lasts from one request to its retry)."""
    user = request_user(ctx)
    return "" if user is None else f"user:{user}"


def digest(arguments: Mapping[str, Any] | None) -> str:
    text = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Sealer:
    """States marked `prefix.`, good for `seconds` after sealing."""

    def __init__(self, prefix: str, seconds: int) -> None:
        self.prefix = prefix
        self.seconds = seconds
        self._key = secrets.token_bytes(32)

    def owns(self, sealed: str | None) -> bool:
        """Whether `sealed` is (or claims to be) one of this sealer's."""
        return sealed is not None and sealed.startswith(self.prefix + ".")

    def seal(self, ctx: Any, tool: str, arguments: Mapping[str, Any] | None, **fields: Any) -> str:
        """`fields` bound to this caller, tool and arguments, tamper-evident, for one retry."""
        payload = {
            **fields,
            "once": secrets.token_hex(8),
            "who": who(ctx),
            "tool": tool,
            "args": digest(arguments),
            "until": int(time.time()) + self.seconds,
        }
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{self.prefix}.{body}.{self._mac(body)}"

    def unseal(
        self, ctx: Any, tool: str, arguments: Mapping[str, Any] | None, sealed: str, refused: Exception
    ) -> dict[str, Any]:
        """The fields sealed for this caller, tool and arguments, now spent; `refused` raised for
        any other (another tenant's, another call's, forged, stale, answered already)."""
        _, _, rest = sealed.partition(".")
        body, _, mac = rest.partition(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            raise refused
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        if (
            payload.get("who") != who(ctx)
            or payload.get("tool") != tool
            or payload.get("args") != digest(arguments)
            or not isinstance(payload.get("until"), int)
            or payload["until"] < time.time()
        ):
            raise refused
        if not _spend(str(payload.get("once")), payload["until"]):
            raise refused  # answered already: a replay
        return dict(payload)

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()


def _spend(once: str, until: int) -> bool:
    """Mark a sealed state answered; False when it was already (the keys are this process's, so
    one process's record is the whole record)."""
    with _SPENT_LOCK:
        if once in _SPENT:
            return False
        if len(_SPENT) > _MAX_SPENT:  # a bound: expired ones go first, all of them
            now = time.time()
            for spent in [k for k, v in _SPENT.items() if v < now]:
                del _SPENT[spent]
        _SPENT[once] = until
        return True
