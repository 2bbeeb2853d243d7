"""Served mode's tenancy: what one authenticated user sees and may call, and where their tools act.

For each user the server keeps one `ServedTools` door: the served allowlist (the same for
everybody) plus that user's own MCP servers from the registry, exposed and called with that
user's id, so the router's own tenancy rules apply (a user's names never reach another user).
Built-ins act in the user's own workspace, from a root template such as `/srv/ws/{user}`, made on
first use and confined like every workspace; with a uid range, each user's commands run as a uid
of its own, which owns that workspace (`identities.py`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from toolroute.builtins.bash import owner_of
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError, ToolError, ToolRegistrationError
from toolroute.naming import UserId
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter
from toolroute.serve.compact import compacted
from toolroute.serve.doors import ServedTools
from toolroute.serve.identities import Workspaces
from toolroute.serve.upstreams import Upstreams, upstreams_of
from toolroute.types import using_resources

if TYPE_CHECKING:
    from toolroute.builtins._process import ProcessTable
    from toolroute.serve.store import UserStore
    from toolroute.serve.upstream_oauth.credentials import Authorizations

log = logging.getLogger("toolroute.serve")
# A user's server configuration, and that user's built-ins' context -> the configuration started.
Confine = Callable[[Mapping[str, Any], BuiltInToolContext], dict[str, Any]]

# How long the unauthenticated door (no user id) is served without a look at the registry. A
# user's door asks the registry on every request instead (`Tenancy.door`), so a change made on
# any replica applies to the next request. API keys are not cached here at all: the verifier
# checks each request's key against the registry, so a revocation applies at once.
REGISTRY_TTL = 5.0
# Users whose door and workspace context stay cached (least recently used go first).
MAX_CACHED_USERS = 1024
# A user unseen this long is released (`release_idle`): door, context, own upstream servers.
IDLE_TIMEOUT = 600.0


def _bound(cache: OrderedDict[Any, Any]) -> None:
    while len(cache) > MAX_CACHED_USERS:
        cache.popitem(last=False)


@dataclass
class _Door:
    served: ServedTools
    servers_fingerprint: str
    read_at: float  # monotonic time of the registry read this door reflects
    generation: int  # the store's generation at that read
    stored: str | None = None  # the registry's version of the user's servers at that read


class Tenancy:
    """Per-user doors over one router."""

    def __init__(
        self,
        router: ToolRouter,
        request: ToolRequest | Sequence[str],
        *positional: Sequence[str] | str | None,
        store: UserStore | None = None,
        workspace_template: str | None = None,
        base_context: BuiltInToolContext | None = None,
        registry_ttl: float = REGISTRY_TTL,
        tenant_uids: range | None = None,
        uid_secret: bytes | None = None,
        confine: Confine | None = None,
        upstreams: Upstreams | None = None,
        **options: Unpack[RequestOptions],
    ) -> None:
        self.workspaces = (
            None if workspace_template is None else Workspaces(workspace_template, tenant_uids, uid_secret)
        )
        self.router = router
        # The gateway as served mode's own interface (users' servers, changes, offers).
        self.upstreams = upstreams if upstreams is not None else upstreams_of(router)
        # What every user is shown (each user's id and own servers join it per door).
        self.request = ToolRequest.of(request, *positional, **options)
        if self.request.user_id is not None or self.request.user_servers:
            raise ToolArgumentError("served mode's request is every user's: the user comes with each call")
        self.store = store
        self.workspace_template = workspace_template
        self.base_context = base_context
        self.registry_ttl = registry_ttl
        # Rewrites a user's server configuration into what is started (own_servers.confined).
        self.confine = confine
        # The router's background processes (bash's table), when served mode made it.
        self.processes: ProcessTable | None = None
        # Users' OAuth authorizations of their own servers (served mode over HTTP sets it).
        self.oauth: Authorizations | None = None
        self._lock = threading.Lock()
        # Least recently used first; beyond MAX_CACHED_USERS the oldest is dropped (it is made again
        # on its user's next request): each context holds its workspace root open.
        self._doors: OrderedDict[str | None, _Door] = OrderedDict()
        self._contexts: OrderedDict[str, BuiltInToolContext] = OrderedDict()
        self._registered: dict[str, dict[str, str]] = {}  # user -> server id -> config text
        self._builds: dict[str | None, threading.Lock] = {}  # a user's door is built under its own
        self._last_seen: dict[str, float] = {}  # user -> monotonic time of their last request
        self._busy: Counter[str] = Counter()  # user -> their requests in progress

    def _user_servers(self, user_id: UserId | None) -> dict[str, dict[str, object]]:
        if user_id is None or self.store is None:
            return {}
        return self.store.servers(user_id)

    def _register_servers(
        self, user_id: str, servers: dict[str, dict[str, object]], launch: Mapping[str, Mapping[str, Any]]
    ) -> list[str]:
        """Hand the user's registry servers to the gateway (once each), each as `launch` starts
        it (a stdio server confined to the tenant's sandbox); the ids of those handed over."""
        gateway = self.upstreams
        with self._lock:  # the release makes the map again (`_compact`): never one it copied
            done = self._registered.setdefault(user_id, {})
        for sid in list(done):
            # Removed, changed or no longer startable here: the old connection goes (a changed
            # one is started again below, as now configured).
            current = servers.get(sid)
            if sid not in launch or current is None or json.dumps(current, sort_keys=True) != done[sid]:
                if gateway is not None:
                    gateway.remove_user_server(user_id, sid)
                del done[sid]
        for sid, config in servers.items():
            if sid not in launch:
                continue  # it cannot be started safely here (logged by `_launchable`)
            if sid not in done:
                if gateway is None:
                    raise ToolArgumentError("this server has no MCP gateway for users' own servers")
                oauth = self.oauth if "oauth" in config else None
                auth = None if oauth is None else oauth.credentials(user_id, sid, config)
                gateway.add_user_server(user_id, sid, launch[sid], auth=auth)
                done[sid] = json.dumps(config, sort_keys=True)
        return [sid for sid in servers if sid in done]

    def _launchable(self, user_id: UserId, servers: dict[str, dict[str, object]]) -> dict[str, dict[str, Any]]:
        """How each of the user's servers is started here: with `confine` (served mode), in the
        tenant's own sandbox and workspace; a server that cannot be is left out, and logged."""
        if self.confine is None:
            return {sid: dict(config) for sid, config in servers.items()}
        launch: dict[str, dict[str, Any]] = {}
        context: BuiltInToolContext | None = None
        for sid, config in servers.items():
            if "command" not in config:  # an HTTP server is the network's: reached as configured
                launch[sid] = dict(config)
                continue
            try:
                context = context or self._server_context(user_id)
                # (under the router's resources: the sandbox's private /tmp is the one bash uses)
                with using_resources(self.router.resources):
                    launch[sid] = self.confine(config, context)
            except ToolError as exc:
                log.warning("user %r: MCP server %r is not started: %s", user_id, sid, exc)
        return launch

    def _server_context(self, user_id: UserId) -> BuiltInToolContext:
        context = self.context(user_id)
        if context is None or self.workspaces is None:
            raise ToolRegistrationError(
                "a tenant's stdio MCP server runs in that tenant's workspace and sandbox: "
                "start the server with --workspace-template"
            )
        return context

    def door(self, user_id: UserId | None) -> ServedTools:
        """The tools `user_id` sees (None: the unauthenticated, single-tenant door). With a
        registry, each call asks it whether the user's servers changed (one indexed read of the
        stored rows, nothing decrypted): a change made on any replica applies to the next request."""
        stored = self._stored_version(user_id)
        with self._lock:
            self._seen(user_id)
            door = self._doors.get(user_id)
            if door is not None and (door.stored == stored if stored is not None else self._fresh(door)):
                self._doors.move_to_end(user_id)
                return door.served
        generation, read_at = self._generation(), time.monotonic()  # before the read: never newer
        servers = self._user_servers(user_id)
        fingerprint = json.dumps(servers, sort_keys=True)
        with self._lock:
            door = self._doors.get(user_id)
            if door is not None and door.servers_fingerprint == fingerprint:
                door.read_at, door.generation, door.stored = read_at, generation, stored
                self._doors.move_to_end(user_id)
                return door.served
        # Outside the lock: confining a server makes the tenant's workspace (and takes the lock).
        launch = self._launchable(user_id, servers) if user_id is not None else {}
        # Nor under it: registering and listing a user's servers waits for their handshakes (30 s
        # for one that never answers), and the event loop takes this lock (`context`): held here,
        # one tenant's silent server stopped every request of the whole server, and its shutdown.
        with self._building(user_id):
            own = self._register_servers(user_id, servers, launch) if user_id is not None else []
            request = dataclasses.replace(self.request, user_id=user_id, user_servers=own)
            served = ServedTools.of(self.router, request)
        with self._lock:
            self._doors[user_id] = _Door(served, fingerprint, read_at, generation, stored)
            _bound(self._doors)
        return served

    @contextmanager
    def _building(self, user_id: UserId | None) -> Iterator[None]:
        """One door build of `user_id` at a time (another user's goes on meanwhile). A user is
        not released while a request of theirs, and so their door's build, is in progress."""
        with self._lock:
            lock = self._builds.setdefault(user_id, threading.Lock())
        with lock:
            yield

    def _seen(self, user_id: UserId | None) -> None:
        if user_id is not None:
            self._last_seen[user_id] = time.monotonic()

    @contextmanager
    def serving(self, user_id: UserId | None) -> Iterator[None]:
        """A request of `user_id` in progress, from taking its door to its answer: the user is
        not released meanwhile (a request queued behind others, or a call longer than the idle
        timeout, would otherwise find its own upstream servers gone), and the idle time counts
        from its end."""
        if user_id is None:
            yield
            return
        with self._lock:
            self._busy[user_id] += 1
            self._seen(user_id)
        try:
            yield
        finally:
            with self._lock:
                self._busy[user_id] -= 1
                if self._busy[user_id] <= 0:
                    del self._busy[user_id]
                self._seen(user_id)

    def present(self) -> int:
        """Users seen within the idle timeout (not released yet)."""
        with self._lock:
            return len(self._last_seen)

    def background_running(self) -> int:
        """Background processes running for any user (a released user's keep running)."""
        return 0 if self.processes is None else self.processes.running_count()

    def release_idle(self, idle: float = IDLE_TIMEOUT) -> list[str]:
        """Release every user unseen for `idle` seconds and with no request in progress: their
        door and workspace context go (a context holds its workspace root open) and the gateway
        forgets their own upstream servers (connections end, tools leave the table); all is made
        again on their next request, from the registry. Returns those users."""
        now = time.monotonic()
        with self._lock:
            gone = [user for user, seen in self._last_seen.items() if now - seen >= idle and user not in self._busy]
            for user in gone:
                del self._last_seen[user]
                self._doors.pop(user, None)
                self._builds.pop(user, None)
                context = self._contexts.pop(user, None)
                if context is not None and self.processes is not None:
                    # Running ones run on (and are listed when the user is back); the output of
                    # ended ones nobody came back for goes.
                    self.processes.release_ended(owner_of(context))
                # A user with a request in progress (a door being built) is not released.
                gateway = self.upstreams
                if self._registered.pop(user, None) is not None and gateway is not None:
                    gateway.remove_user(user)
            if gone:
                self._compact()
        return gone

    def _compact(self) -> None:
        """The per-user maps made again at their present size (under the lock): a dict keeps the
        table it grew to for a crowd after the crowd is released, and that table pins memory of
        its time (serve/compact.py)."""
        self._last_seen = compacted(self._last_seen)
        self._doors = compacted(self._doors)
        self._contexts = compacted(self._contexts)
        self._registered = compacted(self._registered)
        self._builds = compacted(self._builds)
        self._busy = compacted(self._busy)

    def forget_doors(self, user_id: UserId | None) -> None:
        """Drop `user_id`'s door (None: every door), so the next request exposes its tools anew."""
        with self._lock:
            if user_id is None:
                self._doors.clear()
            else:
                self._doors.pop(user_id, None)

    def fresh_door(self, user_id: UserId | None) -> ServedTools | None:
        """The user's cached door if it may be served as is; None when `door` must read the
        registry. Never blocks (safe on the event loop): a busy lock also answers None."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            self._seen(user_id)
            door = self._doors.get(user_id)
            if user_id is not None and self.store is not None:
                return None  # only the registry says whether it is fresh: `door` asks it
            return door.served if door is not None and self._fresh(door) else None
        finally:
            self._lock.release()

    def _stored_version(self, user_id: UserId | None) -> str | None:
        if user_id is None or self.store is None:
            return None
        return self.store.servers_version(user_id)

    def cached_door(self, user_id: UserId | None) -> ServedTools | None:
        """The user's door as last built, fresh or not (never blocks: None if the lock is busy)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            door = self._doors.get(user_id)
            return None if door is None else door.served
        finally:
            self._lock.release()

    def _generation(self) -> int:
        return 0 if self.store is None else self.store.generation

    def _fresh(self, door: _Door) -> bool:
        """Whether `door` may be served without reading the registry again."""
        if self.store is None:
            return True
        return door.generation == self.store.generation and time.monotonic() - door.read_at < self.registry_ttl

    def context(self, user_id: UserId | None) -> BuiltInToolContext | None:
        """The built-ins' context for `user_id`: their own workspace when a template is set."""
        if user_id is None or self.workspaces is None:
            return self.base_context
        with self._lock:
            self._seen(user_id)
            ctx = self._contexts.get(user_id)
            if ctx is None:
                root, uid = self.workspaces.ensure(user_id)
                base = self.base_context
                if base is None:
                    ctx = BuiltInToolContext(root, user_id=user_id, sandbox_uid=uid)
                else:
                    ctx = dataclasses.replace(base, workspace_root=root.resolve(), user_id=user_id, sandbox_uid=uid)
                self._contexts[user_id] = ctx
                _bound(self._contexts)
            else:
                self._contexts.move_to_end(user_id)
            return ctx
