"""The publishing half of the gateway: which listed MCP tool is exposed under which name.

Every remote tool has an identity, (service key, the server's own tool name). Names come from the
router's naming plan (`GatewayRoutes.plan`): a tool takes its own name when free, else a
service-qualified one, else one with a hash of its identity; names held by host tools are never
handed out, and a name once given keeps routing to the same identity for the router's life. The
gateway hands this module what its servers listed; this module publishes and withdraws routes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolroute._core import RouteTable, ToolKind
from toolroute.mcp.projection import NOTHING_DECLARED, Declared
from toolroute.naming import encode_user_tool, mcp_tool_candidates, sanitize_tool_name
from toolroute.routes import GatewayRoutes
from toolroute.schema import JsonSchema
from toolroute.types import ToolDefinition, ToolHost, ToolOutput, ToolTraits, fresh

log = logging.getLogger("toolroute.mcp")


class TargetCaller(Protocol):
    def call(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput: ...

    async def acall(self, target: Any, arguments: Mapping[str, Any]) -> ToolOutput: ...


@dataclass(frozen=True, eq=False)
class McpTarget:
    """One exposed remote tool, routable through the common `Tool` interface. Compared by
    identity: an exposure holds these very objects."""

    service_key: str  # "time", or "user_7_service_time"
    service_id: str
    tool: str  # the server's own tool name
    exposed_name: str
    user_id: str | None = None
    key: str = ""  # what the naming plan gave it: the exposed name, or the user key it encodes
    definition_: ToolDefinition = field(default_factory=dict, repr=False)
    caller: TargetCaller | None = field(default=None, repr=False)
    # What the server declared besides the parameters (result shape, annotations, title), passed
    # on to served clients; the annotations count for scheduling only when the server's config
    # says `trustAnnotations`.
    declared: Declared = field(default=NOTHING_DECLARED, repr=False)
    trusted: bool = False

    @property
    def output_schema(self) -> JsonSchema | None:
        return self.declared.output_schema

    @property
    def annotations(self) -> Mapping[str, Any] | None:
        return self.declared.annotations

    @property
    def title(self) -> str | None:
        return self.declared.title

    @property
    def wire(self) -> Mapping[str, Any] | None:
        """The tool's definition as the server declared it (its own name inside)."""
        return self.declared.wire

    @property
    def kind(self) -> ToolKind:
        return ToolKind.GLOBAL_MCP if self.user_id is None else ToolKind.USER_MCP

    @property
    def name(self) -> str:
        return self.exposed_name

    @functools.cached_property
    def identity(self) -> str:  # asked at every call routed by name: made once
        return identity(self.service_key, self.tool)

    @property
    def traits(self) -> ToolTraits:
        # An upstream server's hints count only for a server trusted to declare them truly.
        declared = self.annotations if self.trusted else None
        if not declared:
            return ToolTraits()
        read_only = declared.get("readOnlyHint") is True and declared.get("destructiveHint") is not True
        destructive = declared.get("destructiveHint")
        return ToolTraits(
            read_only=read_only,
            idempotent=read_only or declared.get("idempotentHint") is True,
            destructive=None if read_only or not isinstance(destructive, bool) else destructive,
        )

    def definition(self) -> ToolDefinition:
        return fresh(self.definition_)

    def _caller(self) -> TargetCaller:
        if self.caller is None:
            raise RuntimeError(f"MCP tool {self.exposed_name!r} has no gateway")
        return self.caller

    def call(self, arguments: Mapping[str, Any], host: ToolHost) -> ToolOutput:
        return self._caller().call(self, arguments)

    async def acall(self, arguments: Mapping[str, Any], host: ToolHost) -> ToolOutput:
        return await self._caller().acall(self, arguments)

    def blocking(self) -> bool:
        return False


def identity(service_key: str, tool: str) -> str:
    return f"mcp:{service_key}\x00{tool}"


@dataclass(frozen=True)
class Listed:
    """One server's listing, projected (outside any lock): tool name -> nameless definition."""

    service_key: str
    service_id: str
    user_id: str | None
    definitions: Mapping[str, ToolDefinition]
    declared: Mapping[str, Declared] = field(default_factory=dict)
    trust_annotations: bool = False


def named(definition: ToolDefinition, name: str) -> ToolDefinition:
    return {**definition, "function": {**definition["function"], "name": name}}


@dataclass
class McpPublisher:
    """The gateway's exposed tools and the reports about their names."""

    caller: TargetCaller
    routes: GatewayRoutes = field(default_factory=lambda: GatewayRoutes(RouteTable()))
    live: dict[str, McpTarget] = field(default_factory=dict)  # identity -> published target
    collisions: dict[str, list[str]] = field(default_factory=dict)  # plain name -> global services
    user_collisions: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # "service/tool" -> exposed (global)

    def attach(self, routes: GatewayRoutes) -> None:
        """Move to the router's routes: everything is planned again there (host names now known)."""
        self.routes = routes
        self.live = {}

    def targets(self, service_key: str) -> list[McpTarget]:
        return [t for t in self.live.values() if t.service_key == service_key]

    def target(self, exposed_name: str, user_id: str | None = None) -> McpTarget | None:
        """The tool published as `exposed_name` (one of `user_id`'s, or a global one): asked of
        the route table, which maps every exposed name."""
        target = self._ours(self.routes.resolve(exposed_name, user_id), user_id)
        return target if target is not None and target.exposed_name == exposed_name else None

    def by_key(self, user_id: str, key: str) -> McpTarget | None:
        """One of `user_id`'s tools by its exposed name, the key the name encodes, or else the
        server's own tool name when exactly one of the user's tools has it."""
        target = self._ours(self.routes.resolve(key, user_id), user_id)
        if target is not None:
            return target
        offering = self.offering(user_id, key)
        return offering[0] if len(offering) == 1 else None

    def offering(self, user_id: str, tool: str) -> list[McpTarget]:
        """`user_id`'s tools whose server calls them `tool`."""
        return [t for t in self.live.values() if t.user_id == user_id and t.tool == tool]

    def _ours(self, found: Any, user_id: str | None) -> McpTarget | None:
        """`found` when it is a tool this publisher has published, in `user_id`'s scope."""
        if isinstance(found, McpTarget) and found.user_id == user_id and self.live.get(found.identity) is found:
            return found
        return None

    # ---- synchronisation -------------------------------------------------------------------

    def sync(self, user_id: str | None, listings: Sequence[Listed]) -> bool:
        """Publish exactly the tools of `listings` (all loaded servers of one scope); True when
        what is routed changed."""
        items = [
            (identity(lst.service_key, tool), mcp_tool_candidates(lst.service_id, tool), lst, tool)
            for lst in listings
            for tool in lst.definitions
        ]
        plan = [(ident, cands) for ident, cands, _, _ in items]
        planned = self.routes.plan(plan) if user_id is None else self.routes.plan_user(user_id, plan)
        wanted: dict[str, McpTarget] = {}
        for (ident, _, lst, tool), name in zip(items, planned, strict=True):
            if name is None:
                log.error("MCP server %r: no free name for tool %r", lst.service_key, tool)
                continue
            exposed = name if user_id is None else encode_user_tool(user_id, name)
            definition = named(lst.definitions[tool], exposed)
            old = self.live.get(ident)
            declared = lst.declared.get(tool, NOTHING_DECLARED)
            if (
                old is not None
                and old.exposed_name == exposed
                and old.definition_ == definition
                and old.declared == declared
                and old.trusted == lst.trust_annotations
            ):
                wanted[ident] = old  # the very same object: exposures holding it stay valid
            else:
                wanted[ident] = McpTarget(
                    lst.service_key,
                    lst.service_id,
                    tool,
                    exposed,
                    user_id,
                    name,
                    definition,
                    self.caller,
                    declared,
                    lst.trust_annotations,
                )
        scope = [t for t in self.live.values() if t.user_id == user_id]
        changed = False
        for old in scope:
            if wanted.get(old.identity) is not old:
                self._withdraw(old)
                changed = True
        for ident, target in wanted.items():
            if self.live.get(ident) is not target:
                self._publish(target)
                changed = True
        self._report(user_id, listings)
        return changed

    def _publish(self, target: McpTarget) -> None:
        if target.user_id is None:
            self.routes.publish(target.identity, target)
        else:
            self.routes.publish_user(target.user_id, target.key, target)
        self.live[target.identity] = target

    def _withdraw(self, target: McpTarget) -> None:
        if self.live.get(target.identity) is target:
            del self.live[target.identity]
        if target.user_id is None:
            self.routes.withdraw(target.exposed_name)
        else:
            self.routes.withdraw_user(target.user_id, target.key)

    def _report(self, user_id: str | None, listings: Sequence[Listed]) -> None:
        owners: dict[str, list[str]] = {}
        for lst in listings:
            for tool in lst.definitions:
                owners.setdefault(sanitize_tool_name(tool), []).append(lst.service_id)
        collisions = {name: sorted(set(ids)) for name, ids in owners.items() if len(set(ids)) > 1}
        if user_id is not None:
            # Only users with a collision are kept: a served gateway meets thousands of users,
            # and one removed (listings empty) must leave nothing behind.
            if collisions:
                self.user_collisions[user_id] = collisions
            else:
                self.user_collisions.pop(user_id, None)
            return
        for plain, services in collisions.items():
            if self.collisions.get(plain) != services:
                log.warning(
                    "MCP tool name %r is offered by several servers (%s); the newcomers are exposed service-qualified",
                    plain,
                    ", ".join(services),
                )
        self.collisions = collisions
        self.renamed = {
            f"{t.service_id}/{t.tool}": t.exposed_name
            for t in self.live.values()
            if t.user_id is None and t.exposed_name != t.tool
        }
