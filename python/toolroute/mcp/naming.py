"""Exposed names for remote tools: sanitised, collision-reported, never in the reserved user form."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from toolroute.naming import NameAllocator, generate_api_function_name, has_user_form, sanitize_tool_name


@dataclass
class NamePlan:
    """`names[(service, tool)] = exposed`; `collisions[plain] = services offering it`."""

    names: dict[tuple[str, str], str] = field(default_factory=dict)
    collisions: dict[str, list[str]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # a server's tool name -> what we expose


def plan_names(tools_by_service: Mapping[str, Iterable[str]], *, reserve_user_form: bool = True) -> NamePlan:
    """Deterministic for a given set of services: a tool name offered by exactly one service is
    exposed as itself (sanitised); one offered by several is a collision, and every one of them
    gets the service-qualified name `{service}_{tool}` instead, so nothing is silently shadowed."""
    plan = NamePlan()
    owners: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for service in sorted(tools_by_service):
        for tool in tools_by_service[service]:
            owners[sanitize_tool_name(tool)].append((service, tool))
    allocator = NameAllocator()
    for plain in sorted(owners):
        pairs = owners[plain]
        services = sorted({s for s, _ in pairs})
        if len(services) > 1:
            plan.collisions[plain] = services
        for service, tool in pairs:
            name = generate_api_function_name(service, tool) if len(services) > 1 else plain
            if reserve_user_form and has_user_form(name):
                name = sanitize_tool_name(f"mcp_{name}")
            exposed = allocator.allocate(f"{service}\x00{tool}", name)
            plan.names[(service, tool)] = exposed
            if exposed != tool:
                plan.renamed[f"{service}/{tool}"] = exposed
    return plan
