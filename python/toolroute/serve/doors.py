"""The door of one exposure, shaped for MCP: its `tools/list` answer, and calls through it.

`ServedTools` is the fixed allowlist a server exposes (the same `ExposedTools` door every adapter
uses: a call runs the very tool listed under its name, anything else is refused before the router
sees it); `FixedDoor` serves one such allowlist to every request. Per-user doors are chosen per
request in `tenant_doors.py`.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import AsyncIterator, Mapping
from functools import cached_property
from typing import Any, Protocol

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp_types.methods import serialize_server_result

from toolroute._workers import LOOKUPS, run_off_loop
from toolroute.allowlist import CallOutcome, ExposedTools, OutcomeKind
from toolroute.mcp.connection import Listable
from toolroute.mcp.freshness import UNKNOWN, Freshness
from toolroute.mcp.offer import UpstreamOffer
from toolroute.serve.approval import AskForApproval, held
from toolroute.serve.asking import PassInputRequired
from toolroute.serve.list_changes import ListWatchers, connection_of, subscribe
from toolroute.serve.tasks import with_task_support
from toolroute.serve.upstreams import upstreams_of
from toolroute.toolsearch import is_search_tool

ServerContext = Any  # mcp's ServerRequestContext; its type parameters add nothing here
# A caller that counts outcomes (served mode's metrics) puts a list here; each call appends its
# outcome kind (the `CallToolResult` keeps only whether it failed).
CALL_KINDS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("toolroute_call_kinds", default=None)

# What the wire form of a listing is built with besides its tools: the 2026 era's result requires
# them; only the tools are kept (the SDK's envelope around the answer has the real ones).
_ENVELOPE_STUB = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


class Listing(list[types.Tool]):
    """A `tools/list` answer that knows its exposure: whose wire form is ready (`listing_wire`)."""

    def __init__(self, tools: list[types.Tool], served: ServedTools) -> None:
        super().__init__(tools)
        self.served = served


class ServedTools(ExposedTools):
    """The fixed allowlist one server exposes, and the only door to the router."""

    policy_subject: Any = None  # who the policy saw when this door was exposed (served mode sets it)

    def refusal(self, name: str) -> CallOutcome:
        return CallOutcome(f"tool {name!r} is not served by this server", OutcomeKind.NOT_FOUND)

    @cached_property
    def _listing(self) -> list[types.Tool]:
        return [self._listed(name, fn) for name, fn in self.definitions.items()]

    def _listed(self, name: str, fn: Mapping[str, Any]) -> types.Tool:
        tool = self.exposure.tools[name]
        wire = getattr(tool, "wire", None)
        if wire is not None:
            # An upstream tool passes as its server declared it (input schema with its title
            # and $defs, output schema, annotations only if declared, title, icons, _meta);
            # only its name is the one this server exposes it under.
            return types.Tool.model_validate({**wire, "name": name})
        traits = tool.traits
        return types.Tool(
            name=name,
            title=getattr(tool, "title", None),
            description=fn.get("description") or None,
            input_schema=fn["parameters"],
            output_schema=getattr(tool, "output_schema", None),
            # toolroute's own tools declare what their traits say.
            annotations=types.ToolAnnotations(read_only_hint=traits.read_only, idempotent_hint=traits.idempotent),
        )

    @cached_property
    def _found(self) -> weakref.WeakKeyDictionary[Any, dict[str, types.Tool]]:
        """Deferred tools each client connection's searches found, in the order found."""
        return weakref.WeakKeyDictionary()

    def mcp_tools_for(self, connection: Any) -> list[types.Tool]:
        """The `tools/list` answer for one connection: the listing, then what its searches found
        (a client that only lets its model call listed tools can then call them)."""
        found = self._found.get(connection) if connection is not None else None
        return self.mcp_tools() + list(found.values()) if found else Listing(self._listing, self)

    @cached_property
    def _wires(self) -> dict[str, dict[str, Any]]:
        return {}

    listing_builds = 0  # how many wire forms of the listing were built (one per protocol version)

    def listing_wire(self, version: str) -> dict[str, Any]:
        """The listing's `tools` in `version`'s wire form, as the SDK would dump them, built once
        per version: a large catalogue is answered at the cost of a lookup."""
        wire = self._wires.get(version)
        if wire is None:
            tools = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in self._listing]
            shaped = serialize_server_result("tools/list", version, {**_ENVELOPE_STUB, "tools": tools})
            wire = self._wires[version] = {"tools": with_task_support(shaped["tools"], version)}
            self.listing_builds += 1
        return wire

    def note_found(self, connection: Any, name: str, trace: Any) -> bool:
        """After a call of `name`: when it was a search, add what it found to `connection`'s
        listing. True when the listing grew (the client is then told to list again)."""
        if connection is None or not is_search_tool(self.exposure.tools.get(name)) or not isinstance(trace, dict):
            return False
        found = self._found.setdefault(connection, {})
        grew = False
        for tool_name in trace.get("found") or ():
            if tool_name in self.exposure.deferred and tool_name not in found:
                found[tool_name] = self._listed(tool_name, self.exposure.tools[tool_name].definition()["function"])
                grew = True
        return grew

    def renewed(self) -> ServedTools:
        """The same request exposed again, now (after the tools behind it changed)."""
        return type(self).of(self.router, self.request)

    def mcp_tools(self) -> list[types.Tool]:
        """The `tools/list` answer, built once: this allowlist is fixed (a change upstream makes a
        new one, `renewed`)."""
        return list(self._listing)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self.exposure.tools.get(name)
        wire = getattr(tool, "wire", None)
        if wire is not None:
            schema: Mapping[str, Any] = wire["inputSchema"]
            return schema
        fn = self.definitions.get(name)
        if fn is None and tool is not None:  # deferred: callable, though not listed
            fn = tool.definition()["function"]
        return None if fn is None else fn["parameters"]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None, connection: Any = None
    ) -> types.CallToolResult:
        """One call; `connection` (the client's) gains the tools a search found in its listing,
        and is told so."""
        args = dict(arguments or {})
        outcome = await self.aexecute(name, args)
        kinds = CALL_KINDS.get()
        if outcome.kind is OutcomeKind.APPROVAL_NEEDED:  # the policy holds it: its client is asked
            try:
                outcome = await held(self, name, args, outcome)
            except AskForApproval:  # asked by the call's result: counted as held
                if kinds is not None:
                    kinds.append(OutcomeKind.APPROVAL_NEEDED.value)
                raise
        if kinds is not None:
            kinds.append(outcome.kind.value)
        if outcome.is_error:
            _raise_passed_error(outcome.trace)
        if not outcome.is_error and self.note_found(connection, name, outcome.trace):
            with contextlib.suppress(Exception):  # a connection that closed meanwhile
                await connection.send_tool_list_changed()
        # An upstream error's structured content passes with its blocks; toolroute's own errors have none.
        shape = outcome.structured if not outcome.is_error or outcome.content is not None else None
        if shape is None and not outcome.is_error and self._typed(name):
            # A client checks a typed tool's result against its output schema, and a result
            # without its structure fails that check: say why here instead.
            note = "the tool declares an output schema, but its structured result "
            note += "was cut with the text (too large)" if _was_cut(outcome.trace) else "is missing"
            return types.CallToolResult(content=[types.TextContent(text=f"{outcome.text}\n[{note}]")], is_error=True)
        # An upstream tool's blocks pass as they came (text, images, audio, resources), else the text.
        content = outcome.content if outcome.content is not None else [types.TextContent(text=outcome.text)]
        return types.CallToolResult(
            content=content, structured_content=shape, is_error=outcome.is_error, _meta=_upstream_meta(outcome.trace)
        )

    def listing_freshness(self) -> Freshness:
        """The caching hints of this listing: its upstream servers' together when every tool it
        lists is an upstream's; none when toolroute's own tools are in it (they follow the live
        config and policy, with no promise of how long they hold)."""
        listed = self.exposure.tools
        if not self.definitions or any(getattr(listed[n], "wire", None) is None for n in self.definitions):
            return UNKNOWN
        return self.offer_freshness("tools")

    def offer_freshness(self, kind: Listable) -> Freshness:
        """The caching hints of the upstream servers' last listings of `kind`, together."""
        return UNKNOWN if self.offer is None else self.offer.freshness(kind)

    # ---- what the upstream servers offer besides tools (issue 43) --------------------------

    @cached_property
    def offer(self) -> UpstreamOffer | None:
        """The prompts, resources and instructions of the upstream servers this allowlist names."""
        upstreams = upstreams_of(self.router)
        if not self.exposure.upstreams or upstreams is None:
            return None
        return upstreams.offer_of(self.exposure.upstreams)

    @cached_property
    def instructions(self) -> str | None:
        """The upstream servers' instructions (blocking: read it off the serving loop once, then
        it is a plain attribute)."""
        return None if self.offer is None else self.offer.instructions()

    def known_instructions(self) -> str | None:
        """`instructions` if read already, else None: never blocks (a handshake asks this)."""
        found: str | None = self.__dict__.get("instructions")
        return found

    async def read_instructions(self) -> None:
        """Read `instructions` off the serving loop, once."""
        if "instructions" not in self.__dict__:
            await run_off_loop(lambda: self.instructions, LOOKUPS)

    async def list_prompts(self) -> list[types.Prompt]:
        return [] if self.offer is None else await self.offer.alist_prompts()

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if self.offer is None:
            raise MCPError(types.INVALID_PARAMS, f"no prompt named {name!r} is offered here")
        return await self.offer.aget_prompt(name, arguments)

    async def list_resources(self) -> list[types.Resource]:
        return [] if self.offer is None else await self.offer.alist_resources()

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return [] if self.offer is None else await self.offer.alist_resource_templates()

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        if self.offer is None:
            raise MCPError(types.INVALID_PARAMS, f"no server here offers the resource {uri!r}")
        return await self.offer.aread_resource(uri)

    def _typed(self, name: str) -> bool:
        tool = self.exposure.tools.get(name)
        return getattr(tool, "output_schema", None) is not None

    def call_refusal(self, name: str) -> types.CallToolResult:
        outcome = self.refusal(name)
        return types.CallToolResult(content=[types.TextContent(text=outcome.text)], is_error=True)


class ServedRequests(Protocol):
    """What a server needs to answer one request: the caller's tools, and a call on their behalf."""

    @property
    def one_view(self) -> bool:
        """Every caller is served the same listings (no per-user view): shared caches may keep them."""
        ...

    async def list_tools(self, ctx: ServerContext) -> list[types.Tool]: ...

    async def call_tool(
        self, ctx: ServerContext, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult: ...

    def input_schema(self, name: str) -> Mapping[str, Any] | None: ...

    def offering(self, ctx: ServerContext) -> contextlib.AbstractAsyncContextManager[ServedTools]:
        """The caller's allowlist, for what its upstream servers offer besides tools, for the
        length of the request."""
        ...

    def instructions(self) -> str | None:
        """The instructions for a connecting client, without waiting (read during the handshake)."""
        ...

    async def ready_instructions(self) -> None:
        """Fetch what `instructions` answers, before serving (off the serving loop)."""
        ...


class FixedDoor:
    """One allowlist for every request: stdio, or HTTP for a single user. When the tools of an
    upstream server it exposes change, it is exposed again and its sessions are told."""

    one_view = True

    def __init__(self, served: ServedTools) -> None:
        self.served = served
        self.watchers = ListWatchers()
        self._stale = False
        subscribe(upstreams_of(served.router), self._tools_changed)

    def _tools_changed(self, user_id: str | None) -> None:
        if user_id is None or user_id == self.served.user_id:
            self._stale = True
            self.watchers.changed(None)

    async def _current(self) -> ServedTools:
        if self._stale:
            self._stale = False
            self.served = await run_off_loop(self.served.renewed, LOOKUPS)
            await self.ready_instructions()
        return self.served

    async def list_tools(self, ctx: ServerContext) -> list[types.Tool]:
        served = await self._current()
        self.watchers.seen(None, ctx)
        return served.mcp_tools_for(connection_of(ctx))

    async def call_tool(
        self, ctx: ServerContext, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        return await (await self._current()).call(name, arguments, connection_of(ctx))

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        return self.served.input_schema(name)

    @contextlib.asynccontextmanager
    async def offering(self, ctx: ServerContext) -> AsyncIterator[ServedTools]:
        yield await self._current()

    def instructions(self) -> str | None:
        # Read once before serving (`ready_instructions`), so the handshake never waits on it.
        return self.served.known_instructions()

    async def ready_instructions(self) -> None:
        """Fetch the upstream servers' instructions off the serving loop, before serving."""
        await self.served.read_instructions()


def _raise_passed_error(trace: Any) -> None:
    """An upstream's JSON-RPC error that the client gets as it is (-32042, a URL the user must
    open: its code and data, not a text for the model; errors.UpstreamRequestError)."""
    passed = trace.get("input_required") if isinstance(trace, dict) else None
    if isinstance(passed, dict):
        raise PassInputRequired(passed)  # a 2026-07-28 client's questions (serve/asking.py)
    error = trace.get("mcp_error") if isinstance(trace, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        raise MCPError(code=error["code"], message=str(error.get("message", "")), data=error.get("data"))


def _upstream_meta(trace: Any) -> dict[str, Any] | None:
    """An upstream result's own `_meta`, passed on as it came (toolroute's own tools have none)."""
    meta = trace.get("meta") if isinstance(trace, dict) and "mcp" in trace else None
    return meta if isinstance(meta, dict) and meta else None


def _was_cut(trace: Any) -> bool:
    return isinstance(trace, dict) and trace.get("truncated") is not None
