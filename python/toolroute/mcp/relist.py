"""Re-listing after `notifications/tools/list_changed`, coalesced per server.

A server may send the notification as often as it likes (20,000 from one call: a re-list and a
log line each grew the shared process by 100 MB and wrote 7,777 lines). Here a server has one
re-list in flight at most; notifications meanwhile ask for one more, started no sooner than
`interval` after the last began; a burst ends with one log line saying how many it held.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("toolroute.mcp")

INTERVAL = 1.0  # seconds: at most one re-list of a server this often


@dataclass
class _Burst:
    notifications: int = 1
    relists: int = 0
    again: bool = True


class Relister:
    """Runs `relist(key, service)` for changed servers, one at a time per key, rate limited."""

    def __init__(
        self,
        relist: Callable[[Any], Awaitable[None]],
        start: Callable[[Coroutine[Any, Any, None]], None],
        interval: float = INTERVAL,
    ) -> None:
        self._relist = relist
        self._start = start  # runs a coroutine in the background (kept until it ends)
        self.interval = interval
        self._bursts: dict[str, _Burst] = {}

    def changed(self, key: str, service: Any) -> None:
        """One notification from server `key` (on the loop)."""
        burst = self._bursts.get(key)
        if burst is not None:
            burst.notifications += 1
            burst.again = True
            return
        burst = self._bursts[key] = _Burst()
        self._start(self._drive(key, service, burst))

    def in_flight(self) -> int:
        return len(self._bursts)

    async def _drive(self, key: str, service: Any, burst: _Burst) -> None:
        try:
            while burst.again:
                burst.again = False
                began = time.monotonic()
                burst.relists += 1
                await self._relist(service)
                if burst.again:
                    await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))
        finally:
            del self._bursts[key]
            if burst.notifications > 1:
                log.info(
                    "MCP server %r: %d tools/list_changed notifications, re-listed %d times",
                    key,
                    burst.notifications,
                    burst.relists,
                )
