"""`notifications/tools/list_changed` for served clients.

When an upstream server's tools change, the gateway lists them again and publishes the new
names; the doors of the users who see that server are then rebuilt (a door is a fixed allowlist,
made again rather than edited) and every open connection of those users is told to list again.
Connections are remembered when they list tools, weakly: a client that went away is forgotten
with its connection. Only connections that stay open (stdio, stateful HTTP) can be told; a stateless
client lists again when it wants to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from toolroute.naming import UserId
from toolroute.serve.compact import compacted
from toolroute.serve.upstreams import Upstreams

log = logging.getLogger("toolroute.serve")

EVERYONE = object()  # the audience of a change to the shared servers: every user


def subscribe(upstreams: Upstreams | None, listener: Callable[[UserId | None], None]) -> None:
    """`listener(user_id)` after the gateway published changed upstream tools (see
    `Upstreams.on_tools_changed`); nothing without one."""
    if upstreams is not None:
        upstreams.on_tools_changed(listener)


def connection_of(ctx: Any) -> Any:
    """The client connection behind request `ctx`, if it can be told things later. The request's
    `ServerSession` lives for that request only; the per-client `Connection` behind it (which the
    SDK's own `Context.connection` hands out, and the low-level context has no public name for in
    mcp 2.3) lives as long as the client."""
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    return connection if connection is not None and hasattr(connection, "send_tool_list_changed") else None


class ListWatchers:
    """The client connections that listed tools, by user (None: the one user of a fixed door)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: dict[str | None, weakref.WeakSet[Any]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sending: set[asyncio.Task[None]] = set()

    def seen(self, user: str | None, ctx: Any) -> None:
        """Remember the connection of request `ctx` as `user`'s (on the serving loop, from a
        `tools/list`)."""
        connection = connection_of(ctx)
        if connection is None:
            return
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._connections.setdefault(user, weakref.WeakSet()).add(connection)

    def prune(self) -> int:
        """Drop the users none of whose connections is still open (their sets are empty once the
        connections are collected), so the map holds only connected users. Returns how many."""
        with self._lock:
            gone = [user for user, group in self._connections.items() if not group]
            for user in gone:
                del self._connections[user]
            if gone:  # a table sized for the crowd would stay (serve/compact.py)
                self._connections = compacted(self._connections)
        return len(gone)

    def users(self) -> int:
        """Users with a set of connections kept."""
        with self._lock:
            return len(self._connections)

    def changed(self, audience: str | object | None) -> None:
        """Tell the connections of `audience` (a user, None, or EVERYONE) to list again; from any thread."""
        with self._lock:
            loop = self._loop
        if loop is None:
            return  # nobody has listed yet
        with contextlib.suppress(RuntimeError):  # the serving loop has ended
            loop.call_soon_threadsafe(self._notify, audience)

    def _notify(self, audience: str | object | None) -> None:
        with self._lock:
            if audience is EVERYONE:
                connections = [c for group in self._connections.values() for c in group]
            else:
                group = self._connections.get(audience) if audience is None or isinstance(audience, str) else None
                connections = [] if group is None else list(group)
        for connection in connections:
            task = asyncio.get_running_loop().create_task(self._send(connection))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    @staticmethod
    async def _send(connection: Any) -> None:
        try:
            await connection.send_tool_list_changed()
        except Exception as exc:  # a connection that closed meanwhile
            log.debug("tools/list_changed not delivered: %s", exc)
