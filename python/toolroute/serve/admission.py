"""Which connections the HTTP server keeps when clients without credentials crowd it.

A connection is *waiting* from the moment it opens until its request head is complete, and again
after each response until its next head, for as long as it is *unproven*: it has not yet served a
verified user (with authentication; without it, a complete head proves it). A waiting connection
is *slow* once it has waited `grace` seconds with nothing unread in the kernel's buffer (bytes
that are there mean the server is the slow one, under load), and *stalled* when it is slow and has
sent part of a head: what a slow-loris does, and what a client that writes its head at once,
however late its loaded machine gets to it, never does. Only those are ever closed to make room,
so a client of a burst of a thousand is never dropped.

- **Every connection** (`max_connections`): one beyond closes the slow connection that has waited
  longest, else it is closed itself.
- **With authentication**, waiting connections per source address (`max_per_source`; an IPv6
  /64 is one source) and in all (`max_unauthenticated`): beyond either, the stalled ones that have
  waited longest are closed, those of the source holding the most first. A cap is exceeded only by
  connections that are not stalled (young, or silent: the idle timeout ends those), and a sweep
  comes back for them.

So a flood of partial heads from one address costs that address its own connections: a tenant's
new connection is admitted beside it (300 such connections, reopened as soon as closed, held every
slot before, and a keyed tenant's calls on new connections went 0 of 10). Room for clients that
authenticate is what `max_connections` leaves above `max_unauthenticated`: a proven connection is
never counted as waiting and never closed to make room.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from typing import Protocol

from toolroute.serve.compact import Peak, compacted

SWEEPS = 4  # while a cap is exceeded, it is looked at this many times a grace


class Admitted(Protocol):
    """A connection as admission sees it."""

    source: str
    partial: bool  # has sent part of a request head since it began to wait

    def unread(self) -> int:
        """Bytes the kernel holds for it that the server has not read yet."""
        ...

    def evict(self) -> None:
        """Close it to make room (its `leave` follows)."""
        ...


def source_of(peer: object) -> str:
    """The source address a connection counts under: an IPv4 address, an IPv6 /64, or "" (a
    unix socket, or an address that could not be read)."""
    if not isinstance(peer, tuple | list) or not peer or not isinstance(peer[0], str):
        return ""
    try:
        address = ipaddress.ip_address(peer[0].split("%", 1)[0])
    except ValueError:
        return ""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(getattr(address, "ipv4_mapped", None) or address)


class Admission:
    """The connections of one server, and which of them wait for a request head."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_unauthenticated: int | None,
        max_per_source: int | None,
        grace: float,
        later: Callable[[float, Callable[[], None]], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`max_unauthenticated` and `max_per_source` None: no cap on waiting connections (a
        server without authentication). `later(delay, fn)` schedules the sweep (the loop's
        `call_later`); without it, caps are kept on arrivals only."""
        self.max_connections = max_connections
        self.max_unauthenticated = max_unauthenticated
        self.max_per_source = max_per_source
        self.grace = grace
        self._later = later
        self._clock = clock
        self._open: set[Admitted] = set()
        self._waiting: dict[Admitted, float] = {}  # since when, the longest waiting first
        self._by_source: dict[str, dict[Admitted, float]] = {}
        self._sweep_due = False
        self._peak = Peak()  # the maps are made again as a crowd's connections leave

    @property
    def open(self) -> int:
        return len(self._open)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def waiting_from(self, source: str) -> int:
        return len(self._by_source.get(source, ()))

    # ---- what connections tell -------------------------------------------------------------

    def arrive(self, conn: Admitted) -> bool:
        """A new connection, waiting for its head; room made for it. False: there is none, and
        the caller closes it (then `leave`s)."""
        self._open.add(conn)
        self._peak.grew(len(self._open))
        self.wait(conn)
        if len(self._open) > self.max_connections and not self._evict_longest_waiting():
            self.leave(conn)
            return False
        self._keep_caps(conn.source)
        return True

    def wait(self, conn: Admitted) -> None:
        """`conn` (open, unproven) waits for a request head from now."""
        if conn not in self._open or conn in self._waiting:
            return
        now = self._clock()
        conn.partial = False
        self._waiting[conn] = now
        self._by_source.setdefault(conn.source, {})[conn] = now

    def started(self, conn: Admitted) -> None:
        """`conn`'s request head is complete (or it is proven): it waits no more."""
        if self._waiting.pop(conn, None) is None:
            return
        of_source = self._by_source[conn.source]
        del of_source[conn]
        if not of_source:
            del self._by_source[conn.source]

    def leave(self, conn: Admitted) -> None:
        self.started(conn)
        self._open.discard(conn)
        if self._peak.due(len(self._open)):  # tables sized for a crowd gone (serve/compact.py)
            self._open = compacted(self._open)
            self._waiting = compacted(self._waiting)
            self._by_source = compacted(self._by_source)

    # ---- making room -----------------------------------------------------------------------

    def _slow(self, conn: Admitted, now: float, since: float) -> bool:
        return now - since >= self.grace and conn.unread() == 0

    def _stalled(self, conn: Admitted, now: float, since: float) -> bool:
        return conn.partial and self._slow(conn, now, since)

    def _evict(self, conn: Admitted) -> None:
        self.leave(conn)
        conn.evict()

    def _evict_longest_waiting(self) -> bool:
        now = self._clock()
        for conn, since in self._waiting.items():
            if self._slow(conn, now, since):
                self._evict(conn)
                return True
            if now - since < self.grace:
                return False  # the rest waited less
        return False

    def _keep_caps(self, source: str) -> None:
        """Bring `source`, then everyone, within the waiting caps by closing stalled connections;
        what is left over a cap is not stalled (yet), and a sweep comes back for it."""
        if self.max_per_source is None or self.max_unauthenticated is None:
            return
        over = self._trim(source, self.max_per_source)
        while len(self._waiting) > self.max_unauthenticated:
            heaviest = max(self._by_source, key=lambda s: len(self._by_source[s]))
            if self._trim(heaviest, len(self._by_source[heaviest]) - 1):
                over = True  # what it has left is not stalled: the sweep comes back
                break
        if over and not self._sweep_due and self._later is not None:
            self._sweep_due = True
            self._later(self.grace / SWEEPS, self._sweep)

    def _trim(self, source: str, cap: int) -> bool:
        """Close `source`'s stalled connections, the longest waiting first, down to `cap`; True
        if it is still over."""
        of_source = self._by_source.get(source)
        if not of_source or len(of_source) <= cap:
            return False
        now = self._clock()
        stalled = [conn for conn, since in of_source.items() if self._stalled(conn, now, since)]
        for conn in stalled[: len(of_source) - cap]:
            self._evict(conn)
        return len(self._by_source.get(source, ())) > cap

    def _sweep(self) -> None:
        self._sweep_due = False
        if self.max_per_source is None:
            return
        for source in list(self._by_source):
            self._keep_caps(source)
