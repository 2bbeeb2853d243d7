"""The exposure of one `ToolRequest`: which tools it names, bound by identity (`Exposure`).

Assembled in one place for every door (`ExposedTools.of`, `ToolRouter.expose`): local tools by
name, local MCP services and upstream servers by id (a user's own by AI4J's user form or by
`user_servers`), each name once, every tool's namespace (the server it came from), the deferred
tools behind a search tool, and code mode's tool over the rest. The router provides what is
registered (`ExposureSource`); this module decides what a request is shown of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from toolroute._core import ToolKind
from toolroute.codemode import CodeMode, code_tool
from toolroute.codemode.tool import RunsTools
from toolroute.errors import ToolArgumentError
from toolroute.exposure import Exposure
from toolroute.host_tools import HostTools
from toolroute.naming import parse_user_service_key
from toolroute.policy import Policy, current_subject
from toolroute.request import ToolRequest
from toolroute.routes import ToolGateway
from toolroute.toolsearch import DEFAULT_NAME as SEARCH_TOOL
from toolroute.toolsearch import CatalogueCache, search_tool
from toolroute.types import Tool

R = TypeVar("R")

CATALOGUES = "toolsearch.catalogues"  # the router's cache of search indexes (`ToolRouter.resource`)


class ExposureSource(RunsTools, Protocol):
    """What an exposure is assembled from: the router (its host tools, gateway and caches)."""

    code_mode: CodeMode | None
    policy: Policy | None
    _host: HostTools

    def ensure_initialized(self) -> None: ...

    def local_tool(self, name: str) -> Tool: ...

    def _local_service_tools(self, service_names: Sequence[str]) -> list[Tool]: ...

    def _require_gateway(self, what: str) -> ToolGateway: ...

    def resource(self, key: str, factory: Callable[[], R]) -> R: ...


def assemble(router: ExposureSource, request: ToolRequest) -> Exposure:
    """What `request` lists, as exposed name -> the very tool it was listed for. Calls through
    the exposure (`ToolRouter.run` / `arun`, or the adapters) reach exactly those tools."""
    user_id = request.user_id
    router.ensure_initialized()
    services = router._host.services
    names = dict.fromkeys(request.functions)
    mode = router.code_mode
    code = mode if mode is not None and mode.name in names else None
    tools: list[Tool] = [router.local_tool(name) for name in names if code is None or name != code.name]
    local, remote, per_user = [], [], []
    for sid in request.mcp_servers:
        user_form = parse_user_service_key(sid, user_id)
        if user_form is not None:
            per_user.append(user_form)
        elif sid in services:
            local.append(sid)
        else:
            remote.append(sid)
    namespaces = {name: sid for sid in local for name in services[sid]}
    tools += router._local_service_tools(local)
    upstreams: list[tuple[str, str | None]] = [(sid, user_id or None) for sid in remote]
    if remote:
        gateway = router._require_gateway(remote[0])
        tools += gateway.user_tools(remote, user_id) if user_id else gateway.global_tools(remote)
    for uid, sid in per_user:
        tools += router._require_gateway(sid).user_tools([sid], uid)
        upstreams.append((sid, uid))
    user_servers = request.user_servers
    if user_servers:
        assert user_id is not None  # the request checked it
        # A user's own servers come and go with the user: one that cannot be reached is
        # left out (logged by the gateway), never the user's whole exposure with it.
        gateway = router._require_gateway(user_servers[0])
        tools += gateway.user_tools(list(user_servers), user_id, available_only=True)
        upstreams += [(sid, user_id) for sid in user_servers]
    unique: dict[str, Tool] = {}
    for tool in tools:
        unique.setdefault(tool.name, tool)
        service = getattr(tool, "service_id", None)
        if isinstance(service, str):
            namespaces.setdefault(tool.name, service)
    policy = router.policy
    policy_hidden: dict[str, Any] = {}
    if policy is not None:
        unique, namespaces = _policed(policy, unique, namespaces, user_id, policy_hidden)
    named = {*local, *remote, *(sid for _, sid in per_user), *user_servers}
    hidden = _deferred(unique, namespaces, request.deferred, code, named)
    if hidden:  # like a built-in, the search tool wins its name
        catalogue = router.resource(CATALOGUES, CatalogueCache).get([unique[n] for n in hidden], namespaces)
        unique.pop(SEARCH_TOOL, None)
        unique[SEARCH_TOOL] = search_tool(catalogue)
    if code is not None:  # like a built-in, it wins its name; its program calls the others
        unique.pop(code.name, None)
        unique[code.name] = code_tool(code, unique.values(), router, listed=lambda name: name not in hidden)
    if policy is not None and (hidden or code is not None):
        # The request's own tools are the policy's too (a rule may deny code mode), though
        # never wrapped: their programs' and searches' calls are policed tool by tool.
        subject = current_subject(user_id)
        for name in [n for n in (SEARCH_TOOL if hidden else None, code and code.name) if n]:
            view = policy.view(unique[name], subject)
            if not view.visible:
                del unique[name]
                policy_hidden[name] = view.verdict
    return Exposure.of(unique.values(), user_id, upstreams, hidden, namespaces, policy_hidden)


def _policed(
    policy: Policy,
    tools: Mapping[str, Tool],
    namespaces: Mapping[str, str],
    user_id: str | None,
    hidden: dict[str, Any],
) -> tuple[dict[str, Tool], dict[str, str]]:
    """The exposure's tools as the policy shows them to this caller: hidden ones left out (into
    `hidden`, with the verdict that hides each), the others wrapped (each call checked, overrides
    shown) under their exposed names."""
    subject = current_subject(user_id)
    kept: dict[str, Tool] = {}
    spaces: dict[str, str] = {}
    for name, tool in tools.items():
        policed = policy.police(tool, subject)
        if policed is None:
            hidden[name] = policy.hiding(tool, subject)
            continue
        kept.setdefault(policed.name, policed)
        if name in namespaces:
            spaces[policed.name] = namespaces[name]
    return kept, spaces


def _deferred(
    tools: Mapping[str, Tool],
    namespaces: Mapping[str, str],
    deferred: bool | Collection[str],
    code: Any,
    servers: Collection[str],
) -> list[str]:
    """The names `deferred` leaves out of the listing, in listing order. A server the request
    names may be deferred while it has no tools (none yet, or out of reach for now)."""
    if deferred is True:
        return [n for n, t in tools.items() if t.kind != ToolKind.BUILTIN and (code is None or n != code.name)]
    if not deferred:
        return []
    wanted = set(deferred)
    hidden = [n for n in tools if n in wanted or namespaces.get(n) in wanted]
    unknown = wanted - set(hidden) - {namespaces.get(n) for n in hidden} - set(servers)
    if unknown:
        raise ToolArgumentError(f"deferred names no tool or server of this request: {', '.join(sorted(unknown))}")
    return hidden
