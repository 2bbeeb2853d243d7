"""The HTTP server's own limits on connections, before a request reaches authentication.

uvicorn (h11) has none of these: a connection that never finishes its request head is kept for
good (its keep-alive timer runs only between requests, and any byte cancels it), so 3,000
slow-loris connections without credentials were never cut, and at a 2,048 descriptor limit a
tenant's call failed with EMFILE. Here, per server:

- **head timeout**: a request head must be complete within `head_timeout` seconds of its first
  byte; else the connection is closed, unless bytes of it still wait unread in the kernel (the
  server is the slow one then: it looks again shortly). Between requests, the keep-alive timeout
  (`idle_timeout`, 75 s) closes a connection.
- **silent connections**: one that has sent nothing yet is not a slow head. A client process
  starved by its own load opens its connections and writes their heads seconds, at 1,000
  sessions minutes, later: at 1,000 sessions from one process every session failed (`ReadError`,
  benches/bench_gateway_load.py) when the head's clock ran from the opening, 218 when a silent
  connection was closed after the keep-alive's 75 s. So it is closed to make room (admission,
  below: the longest waiting first), or once silent for `silent_timeout` (10 minutes: twice the
  longest default timeout of the SDK's client, which has given up on it by then). A slow-loris
  sends part of a head, and meets the head timeout.
- **admission** (`admission.py`): at most `max_connections` in all (well below the descriptor
  limit, so files, pipes and upstream sessions still open); with authentication, connections
  that wait for a request head and have not served a verified user at most `max_unauthenticated`
  in all and `max_unauthenticated_per_source` per source address. Room is made by closing slow
  waiting connections only, never one whose client is sending.

Behind a load balancer, every connection comes from the balancer: give it its own limits too
(HAProxy `timeout http-request`, `maxconn`), as docs/deploy.md shows, or have it send the PROXY
protocol (`proxy_from`, `proxy_protocol.py`): then each connection counts under its client's
address.
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
from dataclasses import dataclass, replace
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolroute.serve.admission import Admission, source_of
from toolroute.serve.proxy_protocol import Network, ProxyHeaderError, looks_like_header, networks, parse, trusted

HEAD_TIMEOUT = 10.0
# How long an idle connection stays open between requests. uvicorn's 5 s lost requests under load:
# a busy client reused a pooled connection the server was closing at that moment (ReadError, 4 to 9
# of 128 sessions in benches/bench_gateway_load.py). Longer than the usual balancer's idle timeout
# (60 s), so the balancer, not this server, closes an idle connection.
KEEP_ALIVE_SECONDS = 75.0
SILENT_TIMEOUT = 600.0  # a new connection that has sent nothing: see the module's docstring
CONNECTION_KEY = "toolroute.connection"  # in a request's ASGI scope: the connection it came on
MAX_UNAUTHENTICATED = 256
MAX_UNAUTHENTICATED_PER_SOURCE = 32
MAX_CONNECTIONS = 4096
# How long a connection may wait for its head before it counts as slow, and may be closed to make
# room (bounded by the head timeout): long enough for a client that connected in a burst of a
# thousand on a loaded machine to be read, far shorter than the time a slow-loris holds on.
SLOW_AFTER = 2.0
_UNREAD = struct.Struct("i")


@dataclass(frozen=True)
class ConnectionLimits:
    head_timeout: float = HEAD_TIMEOUT
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    max_connections: int = MAX_CONNECTIONS
    max_unauthenticated_per_source: int = MAX_UNAUTHENTICATED_PER_SOURCE
    proxy_from: tuple[str, ...] = ()  # the balancers whose PROXY header names the source
    idle_timeout: float = KEEP_ALIVE_SECONDS
    silent_timeout: float = SILENT_TIMEOUT

    def __post_init__(self) -> None:
        networks(self.proxy_from)  # a bad address is refused at start
        if min(self.head_timeout, self.idle_timeout, self.silent_timeout) <= 0:
            raise ValueError("the request head, idle and silent timeouts must be positive numbers of seconds")
        for name in ("max_unauthenticated", "max_connections", "max_unauthenticated_per_source"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    @property
    def grace(self) -> float:
        """How long a waiting connection is safe from being closed to make room."""
        return min(SLOW_AFTER, self.head_timeout / 2)

    def fitted(self, descriptors: int) -> ConnectionLimits:
        """These limits with at most half of `descriptors` (the process's limit) for connections."""
        most = max(64, descriptors // 2)
        if self.max_connections <= most:
            return self
        return replace(
            self,
            max_unauthenticated=min(self.max_unauthenticated, most),
            max_connections=most,
            max_unauthenticated_per_source=min(self.max_unauthenticated_per_source, most),
        )

    def admission(self, *, authenticated: bool, loop: asyncio.AbstractEventLoop | None = None) -> Admission:
        """The bookkeeping of one server; without authentication nobody is verified, so there
        is no cap on unauthenticated connections to hit, only `max_connections`."""
        return Admission(
            max_connections=self.max_connections,
            max_unauthenticated=self.max_unauthenticated if authenticated else None,
            max_per_source=self.max_unauthenticated_per_source if authenticated else None,
            grace=self.grace,
            later=None if loop is None else loop.call_later,
        )


def guarded_protocol(limits: ConnectionLimits, *, authenticated: bool) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits`, for one server (the counts are that server's); call
    it on the server's loop (the admission's sweeps are timers on it)."""
    admission = limits.admission(authenticated=authenticated, loop=asyncio.get_running_loop())
    return type(
        "GuardedH11Protocol",
        (_Guarded,),
        {
            "limits": limits,
            "authenticated": authenticated,
            "admission": admission,
            "balancers": networks(limits.proxy_from),
        },
    )


class _Guarded(H11Protocol):
    limits: ConnectionLimits
    authenticated: bool
    admission: Admission  # the server's, shared by its connections
    balancers: tuple[Network, ...]  # whose connections begin with a PROXY header

    source = ""
    partial = False  # has sent part of a head it is still waiting to complete (admission.py)
    proven = False  # has served a verified user (without auth: has completed a request head)
    _head_timer: asyncio.TimerHandle | None = None
    _silent = False  # the timer running is the silent one: no byte of a head has come yet
    _parsed: Any = None  # the scope of the last request head parsed
    _proxy_header: bytes | None = None  # what came of a balancer's PROXY header so far
    _first = True  # no byte received yet

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        self.source = source_of(peer)
        if trusted(peer, self.balancers):
            # Admitted once the header says whose connection it is; the head timeout bounds it.
            self._proxy_header = b""
            self._arm()
            return
        self._admit()

    def _admit(self) -> bool:
        if not self.admission.arrive(self):
            self.transport.close()  # connection_lost follows, and tidies up
            return False
        self._arm_silent()  # the head's clock starts at its first byte
        return True

    def _take_proxy_header(self, data: bytes) -> bytes | None:
        """The bytes after a balancer's PROXY header once it is complete (the connection's
        source and client set from it, and admitted); None while incomplete or refused."""
        assert self._proxy_header is not None
        data = self._proxy_header + data
        try:
            parsed = parse(data)
        except ProxyHeaderError:
            self.transport.close()
            return None
        if parsed is None:
            self._proxy_header = data
            return None
        self._proxy_header = None
        client, used = parsed
        if client is not None:
            self.client = client  # the ASGI scope's `client` too
            self.source = source_of(client)
        return data[used:] if self._admit() else None

    def data_received(self, data: bytes) -> None:
        if self._first:
            self._first = False
            if self._proxy_header is None and self.balancers and looks_like_header(data):
                self.transport.close()  # a PROXY header from someone not a balancer: refused
                return
        if self._proxy_header is not None:
            rest = self._take_proxy_header(data)
            if not rest:
                return
            data = rest
        if (self._head_timer is None or self._silent) and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first byte of a (next) request: its head's time starts
        super().data_received(data)
        if not self._look_for_head():
            self.partial = True

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may parse a pipelined next head
        if not self._look_for_head() and not self.proven and not self.transport.is_closing():
            self.admission.wait(self)  # unproven: it waits for its next head as a newcomer does

    def _look_for_head(self) -> bool:
        """Whether a new request head was parsed (then: it waits no more)."""
        if self.scope is self._parsed:
            return False
        self._parsed = self.scope
        self._disarm()
        self.admission.started(self)
        if self.authenticated:
            self.scope[CONNECTION_KEY] = self  # type: ignore[literal-required]  # for `proven`
        else:
            self.proven = True
        return True

    def prove(self) -> None:
        """A verified user's request is being answered on this connection."""
        self.proven = True
        self.admission.started(self)

    def unread(self) -> int:
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return 0
        try:
            return int(_UNREAD.unpack(fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * _UNREAD.size))[0])
        except OSError:
            return 0

    def evict(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.admission.leave(self)
        super().connection_lost(exc)

    def _arm(self, delay: float | None = None) -> None:
        self._disarm()
        wait = self.limits.head_timeout if delay is None else delay
        self._head_timer = self.loop.call_later(wait, self._head_too_slow)

    def _arm_silent(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.limits.silent_timeout, self._head_too_slow)
        self._silent = True

    def _disarm(self) -> None:
        self._silent = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        self._silent = False
        if self.transport.is_closing():
            return
        if self.unread():  # the client sent; the server, busy, has not read it yet
            self._arm(self.limits.grace)
            return
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
