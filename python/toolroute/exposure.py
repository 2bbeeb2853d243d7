"""What one request was shown: exposed names bound to the very tools they were listed for.

An allowlist of bare names is not enough: a name can later resolve to something else (an upstream
server advertising `bash`, a tool list changed mid-session). An `Exposure` keeps the resolved
`Tool` objects themselves, and a call through it runs exactly the tool its name was listed for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolroute.errors import ToolRegistrationError
from toolroute.types import Tool, ToolDefinition


@dataclass(frozen=True)
class Exposure:
    """Exposed name -> tool, in listing order, for one user (or none)."""

    tools: Mapping[str, Tool]
    user_id: str | None = None
    definitions: list[ToolDefinition] = field(default_factory=list)
    # The upstream servers the request named, as (service id, user id or None), in order: whose
    # prompts, resources and instructions go with these tools (`McpGateway.offer_of`).
    upstreams: tuple[tuple[str, str | None], ...] = ()
    # Tools callable but not listed: their definitions wait for a search to find them.
    deferred: frozenset[str] = frozenset()
    # The service (local or upstream MCP server) each tool of one came from, by exposed name:
    # the namespace a provider can group them under.
    namespaces: Mapping[str, str] = field(default_factory=dict)
    # The request's tools an operator's policy hides from this caller, by name, each with the
    # verdict that hides it (a `policy.Verdict`): a call naming one is audited with its rule.
    policy_hidden: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        tools: Iterable[Tool],
        user_id: str | None = None,
        upstreams: Iterable[tuple[str, str | None]] = (),
        deferred: Iterable[str] = (),
        namespaces: Mapping[str, str] | None = None,
        policy_hidden: Mapping[str, Any] | None = None,
    ) -> Exposure:
        by_name: dict[str, Tool] = {}
        for tool in tools:
            held = by_name.setdefault(tool.name, tool)
            if held is not tool:
                raise ToolRegistrationError(f"two different tools are exposed as {tool.name!r}")
        hidden = frozenset(deferred)
        listed = [t.definition() for name, t in by_name.items() if name not in hidden]
        spaces = {name: space for name, space in (namespaces or {}).items() if name in by_name}
        return cls(by_name, user_id, listed, tuple(dict.fromkeys(upstreams)), hidden, spaces, policy_hidden or {})

    def deferred_definitions(self) -> list[ToolDefinition]:
        """The definitions of the deferred tools, in listing order (for providers that take them
        marked `defer_loading` and search them themselves)."""
        return [t.definition() for name, t in self.tools.items() if name in self.deferred]

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __iter__(self) -> Iterator[str]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> list[str]:
        return list(self.tools)
