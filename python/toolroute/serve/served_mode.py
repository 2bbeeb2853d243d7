"""`toolroute serve` for many users: the command-line options of served mode, and what they build.

Kept apart from `cli.py` so the CLI only wires parsers to handlers; everything here is also usable
by a program that embeds the server.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolroute._core import set_search_index_default
from toolroute.errors import ToolArgumentError
from toolroute.serve.limits import MAX_TENANT_PROCESSES, LimitBook, UserLimits, cap_tenant_processes
from toolroute.serve.options import deferred_option

if TYPE_CHECKING:
    from toolroute.context import BuiltInToolContext
    from toolroute.router import ToolRouter
    from toolroute.serve.connections import ConnectionLimits
    from toolroute.serve.idle import IdleRelease
    from toolroute.serve.policy_watch import PolicyWatch
    from toolroute.serve.recycle import Recycle
    from toolroute.serve.server import HttpAuth
    from toolroute.serve.store import UserStore
    from toolroute.serve.tasks import TaskLimits
    from toolroute.serve.tenant_doors import TenantDoors

STORE_ENV = "TOOLROUTE_STORE"


def default_store_url() -> str:
    """$TOOLROUTE_STORE, else an SQLite file in the user's data folder."""
    if os.environ.get(STORE_ENV):
        return os.environ[STORE_ENV]
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{data / 'toolroute' / 'users.db'}"


def open_store(url: str | None, key_file: str | None = None) -> UserStore:
    from toolroute.serve.secrets import SecretBox
    from toolroute.serve.store import UserStore

    url = url or default_store_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return UserStore(url, SecretBox(key_file))


def add_served_mode_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("served mode (HTTP, many users)")
    g.add_argument("--auth-jwks", metavar="FILE|URL", help="JWKS to verify bearer JWTs with")
    g.add_argument("--auth-public-key", metavar="PEM_FILE", help="one public key to verify bearer JWTs with")
    g.add_argument("--auth-issuer", metavar="URL", help="required `iss` of bearer JWTs (the authorization server)")
    g.add_argument("--auth-audience", metavar="AUD", help="required `aud` of bearer JWTs (this server)")
    g.add_argument("--auth-scopes", metavar="S,...", help="scopes every request needs (403 without them)")
    g.add_argument("--user-claim", default="sub", help="the JWT claim holding the user id (default: sub)")
    g.add_argument("--api-keys", action="store_true", help="accept API keys from the user registry (--store)")
    g.add_argument("--store", metavar="URL", help=f"user registry: sqlite:///PATH or postgresql://... (${STORE_ENV})")
    g.add_argument("--resource-url", metavar="URL", help="this server's public URL (protected-resource metadata)")
    g.add_argument("--workspace-template", metavar="DIR", help="per-user workspace root, e.g. /srv/ws/{user}")
    g.add_argument(
        "--tenant-uids",
        metavar="FIRST-LAST",
        help="uids for tenants' commands, one each (root only; default 1879048192-1879113727 when root)",
    )
    g.add_argument(
        "--store-key-file",
        metavar="FILE",
        help="Fernet key(s) encrypting upstream secrets in the registry ($TOOLROUTE_STORE_KEY_FILE)",
    )
    g.add_argument("--audit-log", metavar="FILE", help="append one JSON line per call to FILE")
    g.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (pip install 'toolroute[metrics]')",
    )
    g.add_argument(
        "--policy",
        metavar="FILE",
        help="an operator's policy (YAML or JSON): who sees and calls which tools, tool overrides; "
        "read again when the file changes (docs/usage.md, 'Policy')",
    )
    g.add_argument("--max-concurrent-calls", type=int, metavar="N", help="per user (default 8)")
    g.add_argument("--calls-per-minute", type=int, metavar="N", help="per user (default 600)")
    g.add_argument("--max-argument-bytes", type=int, metavar="N", help="one call's arguments (default 1 MiB)")
    g.add_argument(
        "--max-tasks",
        type=int,
        metavar="N",
        help="per user: calls run as MCP tasks that are working or whose result is kept (default 32)",
    )
    g.add_argument(
        "--max-task-ttl",
        type=float,
        metavar="S",
        help="the longest a finished task's result is kept, whatever its client asks (default 3600)",
    )
    g.add_argument(
        "--idle-timeout",
        type=float,
        metavar="S",
        help="release a user unseen this long: cached door, workspace, own upstream servers (default 600)",
    )
    g.add_argument(
        "--max-processes",
        type=int,
        metavar="N",
        help="processes (and threads) each tenant's uid may have at once, commands and own servers "
        f"together (root with tenant uids only; default {MAX_TENANT_PROCESSES})",
    )
    g.add_argument(
        "--max-output-memory",
        type=float,
        metavar="MIB",
        help="what all tenants' background processes' output may hold in memory (default 256); "
        "a start beyond is refused, ended processes' output is released first",
    )
    g.add_argument(
        "--request-head-timeout",
        type=float,
        metavar="S",
        help="close a connection whose request head is not complete this long after its first byte "
        "(default 10; a connection that has sent nothing yet is closed to make room, or after 10 minutes)",
    )
    g.add_argument(
        "--max-unauthenticated-connections",
        type=int,
        metavar="N",
        help="with authentication: connections waiting for a request head that have not yet served a "
        "verified user; beyond, stalled ones (a part of a head, then nothing) are closed (default 256)",
    )
    g.add_argument(
        "--max-unauthenticated-per-source",
        type=int,
        metavar="N",
        help="the same, per source address (an IPv6 /64) (default 32)",
    )
    g.add_argument(
        "--proxy-protocol",
        metavar="ADDRS",
        help="connections from these balancers (addresses or networks, comma-separated) begin with "
        "a PROXY protocol header (v1 or v2, HAProxy's send-proxy-v2), whose client address is the "
        "connection's source; one from anyone else that begins with one is closed",
    )
    g.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="connections open at once (default 4096, at most half the descriptor limit)",
    )
    g.add_argument(
        "--recycle-above",
        type=float,
        metavar="MIB",
        help="with nobody left, replace the process (same pid and socket) once it holds this much "
        "more memory than at start: CPython keeps what a crowd fragmented (default 32; 0: never)",
    )


@dataclass
class ServedMode:
    """What the served-mode options built: the auth of the endpoint and the per-user doors."""

    auth: HttpAuth | None
    doors: TenantDoors
    store: UserStore | None
    idle: IdleRelease | None = None
    recycle: Recycle | None = None  # set when the process may replace itself (authenticated only)
    connections: ConnectionLimits | None = None  # the HTTP server's (serve/connections.py)
    stop_network_audit: Callable[[], None] | None = None  # the egress proxy's refusals, audited
    routes: list[Any] = field(default_factory=list)  # pages beside MCP (upstream_oauth/pages.py)

    def close(self) -> None:
        if self.doors.metrics is not None:
            self.doors.metrics.close()
        if self.doors.tracing is not None:
            self.doors.tracing.close()
        if self.stop_network_audit is not None:
            self.stop_network_audit()
        if self.idle is not None:
            self.idle.close()
        if self.doors.audit is not None:
            self.doors.audit.close()
        if self.store is not None:
            self.store.close()


def _metrics(address: str, tenancy: Any) -> Any:
    from toolroute.serve.metrics import Metrics, parse_address

    host, port = parse_address(address)
    try:
        metrics = Metrics(tenancy)
    except ImportError:
        raise ToolArgumentError("--metrics needs prometheus-client: pip install 'toolroute[metrics]'") from None
    metrics.start(host, port)
    print(f"toolroute: Prometheus metrics at http://{host}:{metrics.port}/metrics", file=sys.stderr, flush=True)
    return metrics


def _limits(args: argparse.Namespace) -> UserLimits:
    changes = {
        name: getattr(args, name)
        for name in ("max_concurrent_calls", "calls_per_minute", "max_argument_bytes")
        if getattr(args, name, None) is not None
    }
    try:
        return UserLimits(**changes)
    except ValueError as exc:
        raise ToolArgumentError(str(exc)) from None


def _task_limits(args: argparse.Namespace) -> TaskLimits:
    from toolroute.serve.tasks import TaskLimits

    changes: dict[str, int] = {}
    if getattr(args, "max_tasks", None) is not None:
        changes["max_live_tasks"] = args.max_tasks
    if getattr(args, "max_task_ttl", None) is not None:
        changes["max_ttl_ms"] = round(args.max_task_ttl * 1000)
        changes["default_ttl_ms"] = min(TaskLimits.default_ttl_ms, changes["max_ttl_ms"])
    try:
        return TaskLimits(**changes)
    except ValueError as exc:
        raise ToolArgumentError(str(exc).replace("max_live_tasks", "--max-tasks")) from None


def _connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    from toolroute.serve.connections import ConnectionLimits

    names = {
        "request_head_timeout": "head_timeout",
        "max_unauthenticated_connections": "max_unauthenticated",
        "max_unauthenticated_per_source": "max_unauthenticated_per_source",
        "max_connections": "max_connections",
    }
    changes: dict[str, Any] = {
        field: getattr(args, flag) for flag, field in names.items() if getattr(args, flag, None) is not None
    }
    if getattr(args, "proxy_protocol", None):
        changes["proxy_from"] = tuple(a.strip() for a in args.proxy_protocol.split(",") if a.strip())
    try:
        return ConnectionLimits(**changes)
    except ValueError as exc:
        raise ToolArgumentError(str(exc)) from None


def auth_requested(args: argparse.Namespace) -> bool:
    return bool(args.auth_jwks or args.auth_public_key or args.api_keys)


def build_served_mode(
    args: argparse.Namespace,
    router: ToolRouter,
    functions: list[str],
    mcp_servers: list[str],
    bound_url: str,
    base_context: BuiltInToolContext | None = None,
    policy: PolicyWatch | None = None,
) -> ServedMode:
    from toolroute._workers import WORKERS
    from toolroute.builtins._process import ProcessTable
    from toolroute.builtins.bash import RESOURCE_KEY
    from toolroute.serve.audit import AuditLog
    from toolroute.serve.auth import ApiKeyVerifier, JwtVerifier, Verifiers
    from toolroute.serve.heap import limit_arenas, no_fast_bins
    from toolroute.serve.idle import IdleRelease
    from toolroute.serve.server import HttpAuth
    from toolroute.serve.tenant_doors import TenantDoors
    from toolroute.serve.tenants import IDLE_TIMEOUT, Tenancy

    raise_descriptor_limit()
    limit_arenas()  # before the worker threads start: see serve/heap.py
    no_fast_bins()

    store = open_store(args.store, args.store_key_file) if (args.api_keys or args.store) else None
    verifiers = Verifiers()
    if args.auth_jwks or args.auth_public_key:
        if not args.auth_issuer or not args.auth_audience:
            raise ToolArgumentError("JWT authentication needs --auth-issuer and --auth-audience")
        public_key = Path(args.auth_public_key).read_text() if args.auth_public_key else None
        verifiers.jwt = JwtVerifier(
            issuer=args.auth_issuer,
            audience=args.auth_audience,
            jwks=args.auth_jwks,
            public_key=public_key,
            user_claim=args.user_claim,
        )
    scopes = [s.strip() for s in (args.auth_scopes or "").split(",") if s.strip()]
    if args.api_keys:
        assert store is not None
        verifiers.api_keys = ApiKeyVerifier(store, scopes=scopes, attributes=policy is not None)
    auth = None
    if verifiers.configured:
        auth = HttpAuth(
            verifiers,
            issuer_url=args.auth_issuer or args.resource_url or bound_url,
            resource_url=args.resource_url or bound_url,
            required_scopes=scopes,
        )
    if store is not None and router.gateway is None:
        # Users' own servers need a gateway even when no global server is configured.
        from toolroute.mcp import McpGateway
        from toolroute.serve.options import gateway_result_cap

        cap = gateway_result_cap(getattr(args, "max_output_chars", None))
        router.attach_gateway(McpGateway(max_result_chars=cap))
    uids = None
    if auth is not None:
        from toolroute.serve.identities import parse_uid_range
        from toolroute.serve.isolation import require_reachable_workspaces, tenant_uids

        uids = tenant_uids(parse_uid_range(args.tenant_uids) if args.tenant_uids else None)
    if auth is not None and base_context is not None:
        from toolroute.serve.isolation import tenant_base_context

        base_context = tenant_base_context(
            base_context,
            functions,
            workspace_template=args.workspace_template,
            uids=uids,
            secret_files=[] if store is None else store.secret_files(),
        )
    if uids is not None:
        cap = MAX_TENANT_PROCESSES if getattr(args, "max_processes", None) is None else args.max_processes
        try:
            cap_tenant_processes(cap)
        except ValueError as exc:
            raise ToolArgumentError(f"--max-processes: {exc}") from None
    if auth is not None and store is not None and uids is not None and args.workspace_template:
        # Users' own stdio servers run as their uids in their workspaces (own_servers.py).
        require_reachable_workspaces(args.workspace_template)
    confine = None
    if auth is not None:
        # Many users: a user's own stdio server is that tenant's program, run in its sandbox.
        from toolroute.serve.own_servers import confined

        confine = confined
    tenancy = Tenancy(
        router,
        functions,
        mcp_servers,
        store=store,
        workspace_template=args.workspace_template,
        base_context=base_context,
        tenant_uids=uids,
        # Replicas on one registry derive a tenant's uid alike; another deployment differently.
        uid_secret=store.deployment_secret() if uids is not None and store is not None else None,
        confine=confine,
        deferred=deferred_option(getattr(args, "defer", None)),
    )
    routes: list[Any] = []
    if auth is not None and store is not None:
        # Users authorize their own OAuth-protected servers through pages of this server.
        from toolroute.serve.upstream_oauth.credentials import Authorizations
        from toolroute.serve.upstream_oauth.pages import routes as oauth_routes

        tenancy.oauth = Authorizations(store, _origin(args.resource_url or bound_url))
        routes = oauth_routes(tenancy.oauth, verifiers.verify_token)
    limits = _limits(args)
    # No user holds more of the shared worker threads than its calls may be at once; work a
    # cancelled call left running still counts (serve/limits.py, _workers.py).
    WORKERS.share = limits.max_concurrent_calls
    # Every tenant's background processes, and the memory their output may hold in all.
    tenancy.processes = router.resources.get(RESOURCE_KEY, ProcessTable)
    if getattr(args, "max_output_memory", None) is not None:
        if args.max_output_memory <= 0:
            raise ToolArgumentError("--max-output-memory must be a positive number of MiB")
        tenancy.processes.max_buffer_bytes = int(args.max_output_memory * 2**20)
    doors = TenantDoors(
        tenancy,
        limits=LimitBook(limits),
        audit=AuditLog(args.audit_log) if args.audit_log else None,
        authenticated=auth is not None,
        fixed_user=args.user_id,
        policy=policy,
    )
    doors.task_limits = _task_limits(args)
    if policy is not None:
        router.policy = policy.policy
    if getattr(args, "metrics", None):
        doors.metrics = _metrics(args.metrics, tenancy)
    from toolroute.serve.tracing import ServedTracing

    doors.tracing = ServedTracing.from_environment()  # None without OTEL_EXPORTER_OTLP_* or the packages
    stop_network_audit = None
    if doors.audit is not None:
        from toolroute.builtins._process.egress import EGRESS

        audit = doors.audit
        stop_network_audit = EGRESS.listen(
            lambda refused: audit.network_refused(
                user=refused.owner, host=refused.host, port=refused.port, via=refused.via, reason=refused.reason
            )
        )
    idle = IDLE_TIMEOUT if getattr(args, "idle_timeout", None) is None else args.idle_timeout
    if idle <= 0:
        raise ToolArgumentError("--idle-timeout must be a positive number of seconds")
    # A released user's search index goes as soon (it holds its workspace and a watch open),
    # unless the index's own lifetime was set (TOOLROUTE_SEARCH_INDEX_TTL wins over a default).
    set_search_index_default("ttl", max(1, math.ceil(idle)))
    # A server is its own warm process: no index daemon beside it (an operator's variable wins).
    set_search_index_default("daemon", 0)
    recycle = _recycle(args, doors) if auth is not None else None  # without auth, sessions live in the process
    connections = _connection_limits(args)
    release = IdleRelease(tenancy, idle, prune=doors.prune, recycle=recycle)
    return ServedMode(auth, doors, store, release.start(), recycle, connections, stop_network_audit, routes)


def _origin(url: str) -> str:
    from urllib.parse import urlparse

    parts = urlparse(url)
    return f"{parts.scheme}://{parts.netloc}"


def _recycle(args: argparse.Namespace, doors: TenantDoors) -> Recycle | None:
    from toolroute.serve.recycle import RECYCLE_ABOVE_MIB, Recycle

    above = getattr(args, "recycle_above", None)
    above = RECYCLE_ABOVE_MIB if above is None else above
    if above < 0:
        raise ToolArgumentError("--recycle-above must be a number of MiB (0: never)")
    return Recycle(doors.quiet, above) if above > 0 else None


def raise_descriptor_limit() -> int:
    """Lift this process's soft limit on open descriptors to its hard limit, as servers do: each
    connected user holds a few (its client's socket, its workspace root, its upstream servers'
    connections), and the usual soft limit of 1,024 is reached near 300 users. Returns the limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # a container may refuse; the soft limit stays
    return soft
