"""The bottom of the package: what every tool is and returns, shared by the router, the built-ins,
local MCP services and the MCP gateway (none of which import each other for it).

Every routable tool, whatever its kind, is a `Tool`: a name, a definition, declared traits, and a
way to validate (`bind`) and run a call. The router stores `Tool` objects in its one registry (the
Rust `RouteTable`) and runs whichever one a name resolves to through this interface only.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from toolroute._core import ToolKind
from toolroute._pace import Pace
from toolroute._sync import run_coroutine_sync
from toolroute.cancellation import run_sync_cancellable
from toolroute.errors import ToolArgumentError

if TYPE_CHECKING:
    from toolroute.context import BuiltInToolContext

ToolDefinition = dict[str, Any]
R = TypeVar("R")


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result: `text` goes to the model (spec 11); `trace` is the structured side channel;
    `content`, when the tool answered in MCP content blocks (an upstream MCP tool; read_file of an
    image or a PDF), those blocks: a served MCP client gets them as they came, and each framework
    adapter passes them on in its own form (`toolroute.blocks`), `text` being what a text-only
    consumer reads."""

    text: str
    trace: Any = None
    content: Any = None


@dataclass(frozen=True)
class ToolTraits:
    """Side effects a tool declares at registration; the agent layer schedules by them."""

    read_only: bool = False  # safe to run beside other calls
    idempotent: bool = False  # safe to retry
    # A sync tool that never blocks (True: async callers run it inline), may block (False: always on
    # a worker thread), or has not said (None: measured, see `_pace.py`).
    quick: bool | None = None
    # May destroy or overwrite what is there (MCP's destructiveHint); None: not said, which
    # counts as "not read-only".
    destructive: bool | None = None


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return f"invalid arguments for {tool!r}: " + "; ".join(parts)


def validate_request(tool: str, model: type[BaseModel], args: Mapping[str, Any]) -> Any:
    """`model` validated from `args`; a failure is a `ToolArgumentError` written for the model."""
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise ToolArgumentError(describe_validation_error(tool, exc)) from None


def fresh(definition: ToolDefinition) -> ToolDefinition:
    """A copy of a cached definition's two outer levels, so a caller renaming or re-describing
    what it was given never changes the cache (`parameters` is shared: treat it as read-only)."""
    return {**definition, "function": {**definition["function"]}}


class ToolResources:
    """Per-router state of tools (e.g. bash's process table), made once per key; a value with a
    `close()` method is closed with the router."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._closers: list[Callable[[], Any]] = []
        self._sealed = False

    def get(self, key: str, factory: Callable[[], R]) -> R:
        with self._lock:
            if key not in self._values:
                value = factory()
                self._values[key] = value
                close = getattr(value, "close", None)
                if callable(close):
                    self._closers.append(close)
                    # A call already running when its router closed asks only now: what it gets
                    # is closed too (a process table made open then would run its exec unstopped).
                    if self._sealed:
                        close()
            return self._values[key]  # type: ignore[no-any-return]

    def seal(self) -> list[Callable[[], Any]]:
        """The closers of the values made so far, for the router's close to run; a value made
        after this is closed as it is made."""
        with self._lock:
            self._sealed = True
            return list(self._closers)


_resources: contextvars.ContextVar[ToolResources | None] = contextvars.ContextVar("toolroute_resources", default=None)


def current_resources() -> ToolResources | None:
    """The resources of the router running the current tool call (None outside a router)."""
    return _resources.get()


@contextmanager
def using_resources(resources: ToolResources) -> Iterator[None]:
    token = _resources.set(resources)
    try:
        yield
    finally:
        _resources.reset(token)


class ToolHost(Protocol):
    """What the router hands a tool when it binds a call."""

    @property
    def resources(self) -> ToolResources: ...

    def builtin_context(self, name: str) -> BuiltInToolContext:
        """The built-in context of the current call; raises when there is none."""
        ...


@runtime_checkable
class Tool(Protocol):
    """One routable tool, whatever executes it."""

    @property
    def kind(self) -> ToolKind: ...

    @property
    def name(self) -> str: ...

    @property
    def traits(self) -> ToolTraits: ...

    def definition(self) -> ToolDefinition: ...

    def call(self, arguments: Mapping[str, Any], host: ToolHost) -> Any:
        """Validate and run, blocking; returns the raw result or a `ToolOutput`."""
        ...

    async def acall(self, arguments: Mapping[str, Any], host: ToolHost) -> Any: ...

    def blocking(self) -> bool:
        """True when `acall` runs the tool on a worker thread (it is synchronous)."""
        ...


UNBOUND: Any = object()  # `call_text`'s "not from text: parse the arguments first"


class LocalTool:
    """The run logic shared by tools that execute in this process: `bind` validates the
    arguments and returns a thunk (a coroutine function when `is_async`)."""

    is_async: bool = False

    @property
    def traits(self) -> ToolTraits:
        return ToolTraits()

    def bind(self, arguments: Mapping[str, Any], host: ToolHost) -> Callable[[], Any]:
        raise NotImplementedError

    def call(self, arguments: Mapping[str, Any], host: ToolHost) -> Any:
        thunk = self.bind(arguments, host)
        return run_coroutine_sync(thunk) if self.is_async else thunk()

    def bind_text(self, text: str, host: ToolHost) -> Callable[[], Any] | None:
        """`bind` straight from JSON text, when the tool can validate it in one pass; None
        means "take the general path" (parse, then `bind`), which also words every error."""
        return None

    def call_text(self, text: str, host: ToolHost) -> Any:
        """`call` for arguments as JSON text; `UNBOUND` when `bind_text` declined."""
        thunk = self.bind_text(text, host)
        if thunk is None:
            return UNBOUND
        return run_coroutine_sync(thunk) if self.is_async else thunk()

    async def acall(self, arguments: Mapping[str, Any], host: ToolHost) -> Any:
        thunk = self.bind(arguments, host)
        if self.is_async:
            return await thunk()
        quick = self.traits.quick
        if quick:
            return thunk()
        if quick is None:  # not declared: inline once measured never to block (`_pace.py`)
            pace = self._pace()
            if pace.inline:
                started = time.perf_counter()
                try:
                    return thunk()
                finally:
                    pace.ran(time.perf_counter() - started)
            thunk = pace.timed(thunk)
        # On a worker thread (context variables carried over); cancelling the awaiting task
        # fires the call's CancelToken, which stoppable tools (bash) listen to.
        return await run_sync_cancellable(thunk)

    def _pace(self) -> Pace:
        pace: Pace | None = self.__dict__.get("_toolroute_pace")
        if pace is None:  # one per tool object; set past a frozen dataclass's guard
            pace = Pace()
            object.__setattr__(self, "_toolroute_pace", pace)
        return pace

    def blocking(self) -> bool:
        return not self.is_async and not self.traits.quick


__all__ = [
    "LocalTool",
    "Tool",
    "ToolDefinition",
    "ToolHost",
    "ToolKind",
    "ToolOutput",
    "ToolResources",
    "ToolTraits",
    "current_resources",
    "describe_validation_error",
    "fresh",
    "using_resources",
    "validate_request",
]
