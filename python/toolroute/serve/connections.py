"""The HTTP server's own limits on connections, before a request reaches authentication.

uvicorn (h11) has none of these: a connection that never finishes its request head is kept for
good (its keep-alive timer runs only between requests, and any byte cancels it), so 3,000
slow-loris connections without credentials were never cut, and at a 2,048 descriptor limit a
tenant's call failed with EMFILE. Here, per server:

- **head timeout**: a request head must be complete within `head_timeout` seconds of the
  connection opening, or of the first byte of a next request on a kept-alive one; else the
  connection is closed. (Between requests, uvicorn's keep-alive timeout, 5 s, closes it.)
- **unauthenticated connections**: at most `max_unauthenticated` connections that have not yet
  completed a request whose user was verified (served mode with authentication; without it,
  one that has not yet completed a request) are open at once; a connection beyond is closed as
  soon as it is accepted. Authenticated clients keep theirs, whatever a crowd without
  credentials does.
- **connections**: at most `max_connections` in all (well below the descriptor limit, so files,
  pipes and upstream sessions still open); beyond, closed as soon as accepted.

Behind a load balancer, every connection comes from the balancer: give it its own limits too
(HAProxy `timeout http-request`, `maxconn`), as docs/deploy.md shows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT = 10.0
CONNECTION_KEY = "toolroute.connection"  # in a request's ASGI scope: the connection it came on
MAX_UNAUTHENTICATED = 256
MAX_CONNECTIONS = 4096


@dataclass(frozen=True)
class ConnectionLimits:
    head_timeout: float = HEAD_TIMEOUT
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    max_connections: int = MAX_CONNECTIONS

    def __post_init__(self) -> None:
        if self.head_timeout <= 0:
            raise ValueError("the request head timeout must be a positive number of seconds")
        for name in ("max_unauthenticated", "max_connections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    def fitted(self, descriptors: int) -> ConnectionLimits:
        """These limits with at most half of `descriptors` (the process's limit) for connections."""
        most = max(64, descriptors // 2)
        if self.max_connections <= most:
            return self
        return ConnectionLimits(self.head_timeout, min(self.max_unauthenticated, most), most)


def guarded_protocol(limits: ConnectionLimits, *, authenticated: bool) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits`, for one server (the counts are that server's)."""
    unproven: set[_Guarded] = set()
    return type(
        "GuardedH11Protocol",
        (_Guarded,),
        {"limits": limits, "authenticated": authenticated, "unproven": unproven},
    )


class _Guarded(H11Protocol):
    limits: ConnectionLimits
    authenticated: bool
    unproven: set[_Guarded]  # shared by the server's connections

    _head_timer: asyncio.TimerHandle | None = None
    _parsed: Any = None  # the scope of the last request head parsed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # (`connections` holds this one already)
        if len(self.unproven) >= self.limits.max_unauthenticated or (
            len(self.connections) > self.limits.max_connections
        ):
            transport.close()  # connection_lost follows, and tidies up
            return
        self.unproven.add(self)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first byte of a next request: its head has the same time
        super().data_received(data)
        if self.scope is not self._parsed:  # a request head was parsed
            self._parsed = self.scope
            self._disarm()
            if self.authenticated:
                self.scope[CONNECTION_KEY] = self  # type: ignore[literal-required]  # for `proven`
            else:
                self.unproven.discard(self)

    def prove(self) -> None:
        """A verified user's request is being answered on this connection."""
        self.unproven.discard(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.unproven.discard(self)
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def proven(app: ASGIApp) -> ASGIApp:
    """`app`, telling each request's connection when it answers a verified user (the auth
    middleware has put the user in the scope by then): the connection no longer counts as
    unauthenticated, even while its first, long call is still streaming."""

    async def proving(scope: Scope, receive: Receive, send: Send) -> None:
        connection = scope.get(CONNECTION_KEY) if scope["type"] == "http" else None
        if connection is None:
            await app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and _verified(scope):
                connection.prove()
            await send(message)

        await app(scope, receive, sending)

    return proving


def _verified(scope: Scope) -> bool:
    return getattr(scope.get("user"), "access_token", None) is not None
