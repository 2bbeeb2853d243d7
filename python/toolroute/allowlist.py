"""The tools one agent was shown, and the only door to the router for that agent's calls.

A model can name a tool it was never given (hallucination, prompt injection); AI4J's server ran
such names anyway. Every adapter and the MCP server run calls through `ExposedTools`, which holds
the exposure by identity: each exposed name is bound to the very tool it was listed for, a call
runs exactly that tool, and any other name is refused before the router sees it. Whatever an
upstream server later advertises (a `bash`, a host function's name, via `list_changed`) cannot
change what an exposed name runs.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from typing_extensions import Self, Unpack

from toolroute._twins import Body, Step, run_async, run_sync
from toolroute.assembly import assemble
from toolroute.cancellation import current_cancel_token
from toolroute.codemode import INNER_CALLS, InnerReply, is_code_tool, not_callable
from toolroute.errors import (
    ApprovalRequiredError,
    PathDeniedError,
    PolicyDeniedError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    ToolPreconditionError,
)
from toolroute.exposure import Exposure
from toolroute.policy.tools import APPROVED, PolicedTool
from toolroute.request import ApprovalRule, RequestOptions, ToolRequest
from toolroute.router import ToolRouter, parse_arguments
from toolroute.toolsearch import is_search_tool
from toolroute.types import ToolDefinition

Arguments = str | Mapping[str, Any] | None

__all__ = [
    "ApprovalRule",  # defined with the request (`toolroute.request`), imported from here too
    "CallOutcome",
    "ExposedTools",
    "Findings",
    "OutcomeKind",
    "ToolMeta",
    "ToolRequest",
    "exposed_tools",
    "inner_reply",
    "kind_of",
    "model_text",
]


class OutcomeKind(str, Enum):
    """What became of a call, in the terms frameworks tell apart: fix your arguments (a retry
    of the model's), the tool ran and failed (a result the model acts on), refused, unknown."""

    OK = "ok"
    BAD_ARGUMENTS = "bad_arguments"  # not JSON, or not the tool's schema: the model should fix them
    NOT_FOUND = "not_found"  # no tool of that name in this allowlist
    REFUSED = "refused"  # a path outside the roots, a policy's or a person's no
    APPROVAL_NEEDED = "approval_needed"  # not run: a person must approve it first
    FAILED = "failed"  # the tool ran and failed (no such file, text not found, a command error)
    CANCELLED = "cancelled"  # the call was cancelled before it finished


@dataclass(frozen=True)
class CallOutcome:
    """What one tool call produced for the model: its text, its kind, and the trace (the
    structured side channel: a built-in's result fields, an MCP tool's metadata)."""

    text: str
    kind: OutcomeKind = OutcomeKind.OK
    trace: Any = None
    content: Any = None  # an upstream MCP tool's content blocks, as it gave them

    @property
    def is_error(self) -> bool:
        return self.kind is not OutcomeKind.OK

    @property
    def structured(self) -> dict[str, Any] | None:
        """The tool's structured result, where it has one: an MCP tool's `structuredContent`, a
        function tool's declared return shape (kept in the trace unless the text was cut)."""
        value = self.trace.get("structured_content") if isinstance(self.trace, dict) else None
        return value if isinstance(value, dict) else None

    @property
    def fields(self) -> dict[str, Any] | None:
        """The result as fields, for frameworks that take a dict: the structured result, else
        the text when it is a JSON object (bash's result, a function's dict), else None."""
        if self.structured is not None:
            return self.structured
        if not self.text.startswith("{"):
            return None
        try:
            value = json.loads(self.text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def kind_of(exc: BaseException) -> OutcomeKind:
    """The outcome kind of a tool error. A missing file or an `edit` whose text is not there is
    the tool failing (the model acts on the result), not arguments to retry."""
    if isinstance(exc, ToolNotFoundError):
        return OutcomeKind.NOT_FOUND
    if isinstance(exc, (PathDeniedError, PolicyDeniedError)):
        return OutcomeKind.REFUSED
    if isinstance(exc, ApprovalRequiredError):
        return OutcomeKind.APPROVAL_NEEDED
    if isinstance(exc, ToolPreconditionError):
        return OutcomeKind.FAILED
    if isinstance(exc, ToolArgumentError):
        return OutcomeKind.BAD_ARGUMENTS
    return OutcomeKind.FAILED


@dataclass(frozen=True)
class ToolMeta:
    """What a framework is told about one exposed tool besides its schema."""

    name: str
    read_only: bool
    idempotent: bool
    destructive: bool
    needs_approval: bool  # every call needs a person's approval (a rule may still ask per call)


class ExposedTools:
    """A fixed allowlist over a router: the exposure of one `ToolRequest` (what
    `get_all_tools(functions, mcp_servers, user_id)` lists, plus `user_servers`, the ids of that
    user's own servers), and the request's `needs_approval`, which says which calls wait for a
    person (each framework adapter asks in that framework's way).

    `ExposedTools.of(router, request)` is the door every adapter is built through; the
    constructor also takes the convenience form of `ToolRequest.of` (functions, mcp_servers,
    user_id positionally, the other options by keyword)."""

    def __init__(
        self,
        router: ToolRouter,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        **options: Unpack[RequestOptions],
    ) -> None:
        self.router = router
        self.request = request = ToolRequest.of(request, *positional, **options)  # to expose it again
        self.user_id = request.user_id
        self.deferred = request.deferred
        self.exposure: Exposure = assemble(router, request)
        self.tool_definitions: list[ToolDefinition] = self.exposure.definitions
        self.definitions: dict[str, dict[str, Any]] = {
            t["function"]["name"]: t["function"] for t in self.tool_definitions
        }
        self.approval_rule = request.needs_approval
        self._approved = False

    @classmethod
    def of(cls, router: ToolRouter, request: ToolRequest) -> Self:
        """The allowlist of `request` over `router` (an adapter class: its defaults otherwise)."""
        return cls(router, request)

    def approving(self) -> Self:
        """This allowlist, its held calls approved: the door an adapter runs a call a person
        approved through (the native paths reach the built-ins through it too)."""
        door = copy.copy(self)
        door._approved = True
        return door

    @property
    def names(self) -> list[str]:
        return list(self.definitions)

    def __contains__(self, name: object) -> bool:
        return name in self.exposure  # listed or deferred: callable either way

    def definition(self, name: str) -> dict[str, Any]:
        """The function definition of an exposed name, listed or deferred (KeyError for none)."""
        listed = self.definitions.get(name)
        return listed if listed is not None else self.exposure.tools[name].definition()["function"]

    def meta(self, name: str) -> ToolMeta:
        """`name`'s declared side effects (an exposed name; KeyError otherwise). Made once per
        name: the exposure is fixed, and so are its tools."""
        cache: dict[str, ToolMeta] = self.__dict__.setdefault("_meta", {})
        found = cache.get(name)
        if found is None:
            found = cache[name] = self._meta_of(name)
        return found

    def _meta_of(self, name: str) -> ToolMeta:
        tool = self.exposure.tools[name]
        traits = tool.traits
        destructive = (not traits.read_only) if traits.destructive is None else traits.destructive
        rule = self.approval_rule
        always = (rule is True and not traits.read_only) or (
            not isinstance(rule, bool) and not callable(rule) and name in rule
        )
        return ToolMeta(name, traits.read_only, traits.idempotent, destructive, always)

    def needs_approval(self, name: str, arguments: Arguments = None) -> bool:
        """Whether this call must wait for a person's approval before it runs."""
        rule = self.approval_rule
        tool = self.exposure.get(name)
        if isinstance(tool, PolicedTool) and tool.needs_approval(_mapping(arguments)):
            return True  # the operator's policy holds this call
        if rule is False or tool is None:
            return False  # nothing needs approval; or refused anyway, with nothing to approve
        if callable(rule):
            return bool(rule(name, _mapping(arguments)))
        return self.meta(name).needs_approval

    def found(self, results: Iterable[tuple[str | None, Any]]) -> list[str]:
        """The deferred tools a conversation's searches found, in order, once each: from its
        tool results as (tool name, trace) pairs (a search's trace names what it showed). Only
        this allowlist's search tools count, and only its own deferred tools come back."""
        deferred = self.exposure.deferred
        if not deferred:
            return []
        found: list[str] = []
        for name, trace in results:
            tool = self.exposure.get(name) if name else None
            if tool is None or not is_search_tool(tool) or not isinstance(trace, Mapping):
                continue
            found += (n for n in trace.get("found") or () if n in deferred)
        return list(dict.fromkeys(found))

    def findings(self) -> Findings:
        """An empty record of what one conversation's searches find, filled call by call."""
        return Findings(self)

    def refusal(self, name: str) -> CallOutcome:
        # The same answer for unknown and for existing-but-unexposed names: nothing leaks.
        return CallOutcome(f"tool {name!r} is not available here", OutcomeKind.NOT_FOUND)

    def execute(self, name: str, arguments: Arguments = None, *, approved: bool = False) -> CallOutcome:
        """Run the tool exposed as `name`, if any; tool errors become error outcomes, never raise.
        A call that needs approval runs only with `approved=True` (the adapter asked)."""
        return run_sync(self._call(name, arguments, approved))

    async def aexecute(self, name: str, arguments: Arguments = None, *, approved: bool = False) -> CallOutcome:
        return await run_async(self._call(name, arguments, approved))

    def _call(self, name: str, arguments: Arguments, approved: bool) -> Body[CallOutcome]:
        """One call through the exposure, written once; running the tool is the twinned step."""
        tool = self.exposure.get(name)
        if tool is None:
            return self.refusal(name)
        approved = approved or self._approved
        askable = self.approval_rule is not False or isinstance(tool, PolicedTool)
        if not approved and askable and self.needs_approval(name, arguments):
            return CallOutcome(f"{name} needs a person's approval before it runs", OutcomeKind.APPROVAL_NEEDED)
        # A code tool's program calls back through this door, unless its host (served mode,
        # with its audit) already said how; approval is this door's own, never the outer call's.
        hooked = is_code_tool(tool) and INNER_CALLS.get() is None
        reset = INNER_CALLS.set(self.inner_call) if hooked else None
        # A person approved this call: a policy's `approve` lets it run (this call only).
        consent = APPROVED.set(approved) if isinstance(tool, PolicedTool) else None
        try:
            output = yield Step(self.router.run, self.router.arun, (tool, arguments))
        except ToolError as exc:
            kind = OutcomeKind.CANCELLED if _cancelled() else kind_of(exc)
            return CallOutcome(str(exc), kind, getattr(exc, "trace", None), getattr(exc, "content", None))
        finally:
            if reset is not None:
                INNER_CALLS.reset(reset)
            if consent is not None:
                APPROVED.reset(consent)
        return CallOutcome(output.text, trace=output.trace, content=output.content)

    def inner_call(self, name: str, arguments: Mapping[str, Any], callable_: bool) -> InnerReply:
        """One call of a code tool's program, through this door (in the program's call thread)."""
        return inner_reply(self.inner_outcome(name, arguments, callable_))

    def inner_outcome(self, name: str, arguments: Mapping[str, Any], callable_: bool) -> CallOutcome:
        if not callable_:
            return CallOutcome(not_callable(name), OutcomeKind.NOT_FOUND)
        return self.execute(name, arguments)


class Findings:
    """The deferred tools one conversation's searches found, once each, in order: for the
    frameworks that keep a run's tools outside its messages (a retriever, the agent's tool
    table), told of each call's outcome. Safe from the threads a framework runs calls on."""

    def __init__(self, tools: ExposedTools) -> None:
        self.tools = tools
        self._names: list[str] = []
        self._taken = 0  # how many `take` has handed out
        self._lock = threading.Lock()

    def note(self, name: str, outcome: CallOutcome) -> None:
        """Record what the call of `name` found (nothing unless it is this allowlist's search)."""
        found = self.tools.found([(name, outcome.trace)])
        if found:
            with self._lock:
                self._names += (n for n in found if n not in self._names)

    def all(self) -> list[str]:
        with self._lock:
            return list(self._names)

    def take(self) -> list[str]:
        """What was found since the last `take`."""
        with self._lock:
            new, self._taken = self._names[self._taken :], len(self._names)
            return new


def inner_reply(outcome: CallOutcome) -> InnerReply:
    """What a code program receives for an outcome: its text, or its kind and message."""
    return InnerReply(not outcome.is_error, outcome.text, outcome.kind.value if outcome.is_error else None)


def _cancelled() -> bool:
    """Whether this call was cancelled (its client went away): a tool stopped for that says so."""
    token = current_cancel_token()
    return token is not None and token.cancelled


def _mapping(arguments: Arguments) -> Mapping[str, Any]:
    """Arguments as a mapping for an approval rule (ones the router would refuse: empty)."""
    try:
        return parse_arguments(arguments)
    except ToolArgumentError:
        return {}


def model_text(outcome: CallOutcome) -> str:
    """For formats without an error flag: mark errors in the text itself."""
    return f"Error: {outcome.text}" if outcome.is_error else outcome.text


def exposed_tools(
    source: ToolRouter | ExposedTools,
    request: ToolRequest | Sequence[str] = (),
    *positional: Sequence[str] | str | None,
    **options: Unpack[RequestOptions],
) -> ExposedTools:
    """What a framework adapter wraps: `source` itself when it is an allowlist already, else
    the allowlist of the request (a `ToolRequest`, or `ToolRequest.of`'s convenience form)."""
    if isinstance(source, ExposedTools):
        if request or positional or options:
            raise TypeError("an ExposedTools carries its request: pass it alone")
        return source
    return ExposedTools.of(source, ToolRequest.of(request, *positional, **options))
