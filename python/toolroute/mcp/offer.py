"""`UpstreamOffer`: the prompts, resources, resource templates and instructions of the upstream
servers one request names, fetched from them when asked (issue 43).

Nothing is cached: a list is asked of the servers each time (they page and change on their own),
on the gateway loop, all servers at once; a server that fails is left out of a list (logged), and
never takes the others with it. What is exposed under which name is `offerings.py`'s rule.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolroute.errors import ToolError
from toolroute.mcp.connection import Connection, Listable
from toolroute.mcp.freshness import UNKNOWN, Freshness, combined
from toolroute.mcp.loop import LoopThread
from toolroute.mcp.offerings import (
    Offered,
    first_by_key,
    joined_instructions,
    prompt_names,
    resource_owner,
    visible,
)

log = logging.getLogger("toolroute.mcp")

T = TypeVar("T")


@dataclass(frozen=True)
class Upstream:
    """One server of the request: its id as the request named it, and its connection."""

    service_id: str
    connection: Connection
    timeout: float


class UpstreamOffer:
    """What the request's upstream servers offer besides tools. Every method has a synchronous
    form and an `a`-prefixed one for async callers (both run on the gateway loop)."""

    def __init__(self, loop: LoopThread, upstreams: Sequence[Upstream]) -> None:
        self._loop = loop
        self.upstreams = tuple(upstreams)

    # ---- on the gateway loop -------------------------------------------------------------

    async def _listings(self, kind: Listable) -> list[tuple[str, list[Any]]]:
        async def one(upstream: Upstream) -> list[Any]:
            try:
                return await upstream.connection.list_all(kind)
            except (ToolError, MCPError) as exc:
                log.warning("MCP server %r is left out of the %s: %s", upstream.connection.key, kind, exc)
                return []

        results = await asyncio.gather(*(one(u) for u in self.upstreams))
        return [(u.service_id, items) for u, items in zip(self.upstreams, results, strict=True)]

    async def _prompts(self) -> dict[str, Offered]:
        return prompt_names(await self._listings("prompts"))

    async def _list_prompts(self) -> list[types.Prompt]:
        return [_renamed(visible(o.item), name) for name, o in (await self._prompts()).items()]

    async def _get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        offered = (await self._prompts()).get(name)
        if offered is None:
            raise MCPError(types.INVALID_PARAMS, f"no prompt named {name!r} is offered here")
        upstream = self._upstream(offered.service_id)
        result: types.GetPromptResult = await upstream.connection.request(
            f"the prompt {offered.own_name!r}",
            lambda session: session.get_prompt(offered.own_name, arguments),
            upstream.timeout,
        )
        return visible(result)

    async def _list_resources(self) -> list[types.Resource]:
        return [visible(o.item) for o in first_by_key(await self._listings("resources"), "uri").values()]

    async def _list_templates(self) -> list[types.ResourceTemplate]:
        listings = await self._listings("resource_templates")
        return [visible(o.item) for o in first_by_key(listings, "uri_template").values()]

    async def _read_resource(self, uri: str) -> types.ReadResourceResult:
        resources, templates = await asyncio.gather(self._listings("resources"), self._listings("resource_templates"))
        owner = resource_owner(uri, first_by_key(resources, "uri"), first_by_key(templates, "uri_template"))
        if owner is None:
            raise MCPError(types.INVALID_PARAMS, f"no server here offers the resource {uri!r}")
        upstream = self._upstream(owner)
        result: types.ReadResourceResult = await upstream.connection.request(
            f"reading {uri!r}", lambda session: session.read_resource(uri), upstream.timeout
        )
        return visible(result)

    async def _instructions(self) -> str | None:
        async def one(upstream: Upstream) -> str | None:
            try:
                await upstream.connection.session()
            except ToolError as exc:
                log.warning("MCP server %r: no instructions: %s", upstream.connection.key, exc)
                return None
            return upstream.connection.instructions

        texts = await asyncio.gather(*(one(u) for u in self.upstreams))
        return joined_instructions([(u.service_id, t or "") for u, t in zip(self.upstreams, texts, strict=True)])

    def freshness(self, kind: Listable) -> Freshness:
        """The caching hints of these servers' last listings of `kind`, together (freshness.py)."""
        return combined(u.connection.freshness.get(kind, UNKNOWN) for u in self.upstreams)

    def _upstream(self, service_id: str) -> Upstream:
        return next(u for u in self.upstreams if u.service_id == service_id)

    # ---- the API -------------------------------------------------------------------------

    def _run(self, make: Callable[[], Awaitable[T]]) -> T:
        return self._loop.run(_awaited(make))

    async def _arun(self, make: Callable[[], Awaitable[T]]) -> T:
        return await self._loop.arun(_awaited(make))

    def list_prompts(self) -> list[types.Prompt]:
        return self._run(self._list_prompts)

    async def alist_prompts(self) -> list[types.Prompt]:
        return await self._arun(self._list_prompts)

    def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> types.GetPromptResult:
        return self._run(lambda: self._get_prompt(name, arguments))

    async def aget_prompt(self, name: str, arguments: dict[str, str] | None = None) -> types.GetPromptResult:
        return await self._arun(lambda: self._get_prompt(name, arguments))

    def list_resources(self) -> list[types.Resource]:
        return self._run(self._list_resources)

    async def alist_resources(self) -> list[types.Resource]:
        return await self._arun(self._list_resources)

    def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return self._run(self._list_templates)

    async def alist_resource_templates(self) -> list[types.ResourceTemplate]:
        return await self._arun(self._list_templates)

    def read_resource(self, uri: str) -> types.ReadResourceResult:
        return self._run(lambda: self._read_resource(uri))

    async def aread_resource(self, uri: str) -> types.ReadResourceResult:
        return await self._arun(lambda: self._read_resource(uri))

    def instructions(self) -> str | None:
        """The servers' instructions: one server's as they are, several joined under their ids."""
        return self._run(self._instructions)

    async def ainstructions(self) -> str | None:
        return await self._arun(self._instructions)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def _renamed(prompt: types.Prompt, name: str) -> types.Prompt:
    return prompt if prompt.name == name else prompt.model_copy(update={"name": name})
