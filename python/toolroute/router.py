"""ToolRouter: registration, exposure by identity and routing with the spec's precedence.

Precedence (spec 5): built-in, user-level remote MCP, local MCP, function tool, global gateway.
The one registry is the Rust `RouteTable` (name -> `Tool`, with the naming plan that keeps names
stable and host names reserved); this module registers tools into it, builds exposures, and runs
whatever a name resolves to through the common `Tool` interface (see `toolroute.types`), turning
every result into a string (spec 11), with `execute` also returning the structured trace.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, TypeVar

import pydantic_core

from toolroute import _tracing
from toolroute._core import RouteTable, ToolKind, has_user_form, user_tool_owners
from toolroute._twins import Body, Step, run_async, run_sync
from toolroute.assembly import CATALOGUES, assemble
from toolroute.builtins import BuiltinTool, builtin_tools
from toolroute.checkpoints import Checkpoint, Rewind
from toolroute.codemode import CodeMode
from toolroute.context import BuiltInToolContext, current_builtin_tool_context
from toolroute.errors import (
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
)
from toolroute.exposure import Exposure
from toolroute.host_tools import ENTRY_POINT_GROUP, HostTools
from toolroute.naming import UserId
from toolroute.policy import Policy, current_subject
from toolroute.request import ToolRequest
from toolroute.resulttext import result_text
from toolroute.routes import GatewayRoutes, ToolGateway
from toolroute.types import (
    UNBOUND,
    Tool,
    ToolDefinition,
    ToolOutput,
    ToolResources,
    ToolTraits,
    describe_validation_error,
    validate_request,
)

R = TypeVar("R")

__all__ = [
    "CATALOGUES",
    "ENTRY_POINT_GROUP",
    "ToolKind",
    "ToolRouter",
    "describe_validation_error",
    "parse_arguments",
    "result_text",
    "validate_request",
]

_OTEL_MODULES = sys.modules  # where `invoke` looks for OpenTelemetry: loaded, or no one traces


MAX_ARGUMENT_DEPTH = 128  # nesting of objects and arrays in one call's arguments


def parse_arguments(argument: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON object string or a mapping; blank means no arguments. Whatever a model sends, the
    answer is a dict or a ToolArgumentError: nesting past MAX_ARGUMENT_DEPTH, numbers past
    Python's digit limit, invalid JSON and lone surrogates never escape as raw exceptions."""
    if argument is None:
        return {}
    if type(argument) is not str and isinstance(argument, Mapping):  # an ABC check: skipped for str
        value: Any = dict(argument)
    else:
        if isinstance(argument, (bytes, bytearray)):
            argument = argument.decode("utf-8", "replace")
        if not isinstance(argument, str):
            raise ToolArgumentError(
                f"arguments must be a JSON object string or a mapping, got {type(argument).__name__}"
            )
        if not argument.strip():
            return {}
        value = _loads(argument)
        if not isinstance(value, dict):
            raise ToolArgumentError(f"arguments must be a JSON object, got {type(value).__name__}")
    _check_depth(value)
    return value  # type: ignore[no-any-return]


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _shallow(text: str) -> bool:
    """Whether JSON `text` cannot nest past MAX_ARGUMENT_DEPTH (each level opens a bracket), so
    a one-pass validation needs no depth walk. A text that short cannot: no count needed."""
    return len(text) <= MAX_ARGUMENT_DEPTH or text.count("{") + text.count("[") <= MAX_ARGUMENT_DEPTH


def _check_depth(value: dict[str, Any]) -> None:
    """Refuse arguments nested deeper than MAX_ARGUMENT_DEPTH (walked without recursion)."""
    for v in value.values():
        if type(v) not in _SCALARS:
            break
    else:
        return  # the common case, a flat object: no walk
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            raise ToolArgumentError(f"arguments nest more than {MAX_ARGUMENT_DEPTH} levels deep")
        children = node.values() if isinstance(node, Mapping) else node if isinstance(node, (list, tuple)) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (Mapping, list, tuple)))


def _loads(text: str) -> Any:
    """`json.loads(text)`, through pydantic-core's parser first (several times faster on the
    small objects tool arguments are); anything that parser refuses (lone surrogate escapes, bad
    JSON) gets json's own answer and error message."""
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        pass
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ToolArgumentError(f"arguments nest more than {MAX_ARGUMENT_DEPTH} levels deep") from None
    except ValueError as exc:  # e.g. an integer past sys.get_int_max_str_digits()
        raise ToolArgumentError(f"arguments hold a value Python cannot read: {str(exc)[:120]}") from None


def _as_output(result: Any) -> ToolOutput:
    return result if isinstance(result, ToolOutput) else ToolOutput(result_text(result))


def _as_text(result: Any) -> str:
    if type(result) is str:  # the common answer, without the class checks
        return result
    return result.text if isinstance(result, ToolOutput) else result_text(result)


def _as_tool_error(name: str, exc: BaseException) -> BaseException:
    """What a failure of tool `name` becomes: toolroute's own errors pass through; anything else a
    tool raises is wrapped (the caller chains it)."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, Exception):
        return ToolExecutionError(f"tool {name!r} failed: {type(exc).__name__}: {exc}", tool=name)
    # pyo3's PanicException derives from BaseException; a core bug must not escape a caller's
    # `except Exception` and end an agent's whole batch.
    if type(exc).__module__ == "pyo3_runtime":
        return ToolExecutionError(f"tool {name!r} hit an internal error in toolroute's core: {exc}", tool=name)
    return exc


class ToolRouter:
    """The unified tool router. Thread-safe for invocation; registration takes a lock."""

    def __init__(
        self,
        *,
        packages: Iterable[str | ModuleType] = (),
        entry_points: bool = False,
        gateway: ToolGateway | None = None,
        context: BuiltInToolContext | None = None,
        builtins: Mapping[str, BuiltinTool[Any]] | None = None,
        code_mode: CodeMode | None = CodeMode(),  # noqa: B008  # frozen, shared safely
        policy: Policy | None = None,
    ) -> None:
        self._table = RouteTable()
        self._lock = threading.RLock()
        self._pending_packages: list[str | ModuleType] = list(packages)
        self._entry_points = entry_points
        self._initialized = False
        self._host = HostTools(self._table, self._lock)
        self._default_context = context
        # A request that lists `code_mode.name` gets a code tool over the rest of what it lists.
        self.code_mode = code_mode
        # Attached once the host's own tools are registered (see ensure_initialized), so the
        # naming plan already reserves their names when the gateway's tools are named.
        self._gateway: ToolGateway | None = gateway
        self._gateway_attached = False
        self._closed = False
        self._close_callbacks: list[Callable[[], Any]] = []
        self._resources = ToolResources()
        # An operator's policy (docs/usage.md, "Policy"): which tools each caller sees and which
        # calls run. Replaced whole on a reload; an exposure keeps the one it was made with.
        self.policy = policy
        # With OTEL_EXPORTER_OTLP_* set (and the traces extra), calls' spans are exported
        # with no code of the host's: the SDK is set up here, unless the host set one up.
        _tracing.provider_from_environment()
        # The eight coding tools by default; a host may pass its own table (or an empty one).
        for name, tool in (builtin_tools() if builtins is None else builtins).items():
            self._table.insert(ToolKind.BUILTIN, name, tool)

    # ---- registration (the host's own tools: `host_tools.py`) ---------------------------

    def scan(self, *packages: str | ModuleType) -> None:
        """Import each package and every submodule, registering the tools defined there; each
        module registers whole or not at all, and a module already registered is skipped."""
        self._host.scan(*packages)

    def register(
        self, obj: Any, *, replace: bool = False, rename: Mapping[str, str] | None = None, prefix: str = ""
    ) -> list[str]:
        """Register a `@function_tool` or `@mcp_service` object; returns the exposed names.
        Registering the same object again is a no-op that returns the same names.

        A function tool is exposed under its declared name, or `rename[name]`, or `prefix + name`
        (e.g. a class of BFCL tools with a method named `grep`: `rename={"grep": "fs_grep"}`
        registers it beside the built-in). Without them a clash stays a loud refusal."""
        return self._host.register(obj, replace=replace, rename=rename, prefix=prefix)

    def register_all(
        self, objects: Iterable[Any], *, rename: Mapping[str, str] | None = None, prefix: str = ""
    ) -> list[str]:
        """Register several objects as one unit (all or none), renamed as `register` says."""
        return self._host.register_all(objects, rename=rename, prefix=prefix)

    def ensure_initialized(self) -> None:
        """Scan the packages given at construction (and plugins) exactly once; a failure is
        raised again on every later use rather than leaving a silently partial router."""
        if self._initialized:
            return
        with self._lock:
            if self._initialized:
                return
            self.scan(*self._pending_packages)
            if self._entry_points:
                self._host.load_entry_points()
            self._pending_packages = []
            if self._gateway is not None and not self._gateway_attached:
                self._gateway.attach(GatewayRoutes(self._table))
                self._gateway_attached = True
            self._initialized = True

    def attach_gateway(self, gateway: ToolGateway) -> None:
        """Route to `gateway`'s tools (named after the host's own tools, whose names it never gets)."""
        with self._lock:
            if self._gateway is not None:
                raise ToolRegistrationError("this router already has a gateway")
            self._gateway = gateway
            if self._initialized:
                gateway.attach(GatewayRoutes(self._table))
                self._gateway_attached = True

    @property
    def gateway(self) -> ToolGateway | None:
        return self._gateway

    @property
    def table(self) -> RouteTable:
        return self._table

    @property
    def resources(self) -> ToolResources:
        return self._resources

    def on_close(self, callback: Callable[[], Any]) -> None:
        """Run `callback()` when the router closes (background processes, sessions...)."""
        self._close_callbacks.append(callback)

    def resource(self, key: str, factory: Callable[[], R]) -> R:
        """Per-router state of a tool (e.g. bash's process table), made once; an object with a
        `close()` method is closed when the router closes."""
        return self._resources.get(key, factory)

    # ---- exposure ----------------------------------------------------------------------

    def _not_found(self, name: str, user_id: str | None, detail: str = "") -> ToolNotFoundError:
        return ToolNotFoundError(name, self._table.suggest(name, user_id), detail)

    def local_tool(self, name: str) -> Tool:
        """The host tool (built-in, local MCP or function) exposed as `name`."""
        hit = self._table.resolve(name)
        if hit is None or not hit[0].host:
            raise self._not_found(name, None, "" if hit is None else "not a local tool")
        tool: Tool = hit[1]
        return tool

    def definition(self, name: str) -> ToolDefinition:
        """The definition of one local tool (built-in, local MCP or function), by exposed name."""
        return self.local_tool(name).definition()

    def get_all_function_tools(self, function_list: Sequence[str] | None) -> list[ToolDefinition]:
        """Definitions of exactly the named local tools; an unknown name is an error."""
        return self.expose(function_list).definitions

    def _local_service_tools(self, service_names: Sequence[str]) -> list[Tool]:
        out: list[Tool] = []
        for service in service_names:
            if service not in self._host.services:
                raise ToolNotFoundError(service, [], "no such local MCP service")
            out.extend(self.local_tool(n) for n in self._host.services[service])
        return out

    def get_local_mcp_tools(self, service_names: Sequence[str]) -> list[ToolDefinition]:
        self.ensure_initialized()
        return Exposure.of(self._local_service_tools(service_names)).definitions

    def _require_gateway(self, what: str) -> ToolGateway:
        if self._gateway is None:
            raise ToolNotFoundError(
                what,
                [],
                "not a local MCP service, and no MCP gateway is attached to this router "
                "(upstream servers come from mcp_config=, or --mcp-config FILE on the command line)",
            )
        return self._gateway

    def get_global_mcp_tools(self, mcp_server_ids: Sequence[str] | None) -> list[ToolDefinition]:
        ids = list(mcp_server_ids or ())
        if not ids:
            return []
        self.ensure_initialized()
        return Exposure.of(self._require_gateway(ids[0]).global_tools(ids)).definitions

    def get_user_mcp_tools(self, mcp_server_ids: Sequence[str] | None, user_id: str) -> list[ToolDefinition]:
        user_id = UserId.of(user_id)
        ids = list(mcp_server_ids or ())
        if not ids:
            return []
        self.ensure_initialized()
        return Exposure.of(self._require_gateway(ids[0]).user_tools(ids, user_id), user_id).definitions

    def expose(
        self,
        function_list: Sequence[str] | None = None,
        mcp_server_ids: Sequence[str] | None = None,
        user_id: str | None = None,
        *,
        user_servers: Sequence[str] = (),
        deferred: bool | Collection[str] = (),
    ) -> Exposure:
        """What `get_all_tools` lists, as exposed name -> the very tool it was listed for: the
        exposure of `ToolRequest(function_list, mcp_server_ids, user_id, ...)` (its fields say what
        each option names; `toolroute.assembly` assembles it). Calls through the exposure (`run` /
        `arun`, or the adapters) reach exactly those tools."""
        request = ToolRequest(
            function_list or (), mcp_server_ids or (), user_id, user_servers=user_servers, deferred=deferred
        )
        return assemble(self, request)

    def get_all_tools(
        self,
        function_list: Sequence[str] | None = None,
        mcp_server_ids: Sequence[str] | None = None,
        user_id: str | None = None,
    ) -> list[ToolDefinition]:
        """Exactly what was asked: the named local tools plus the named MCP services' tools.

        An MCP id names a local `@mcp_service`, a gateway service, or (AI4J's form)
        `user_{userId}_service_{serviceId}` for a user's own server.
        """
        return self.expose(function_list, mcp_server_ids, user_id).definitions

    def traits(self, name: str, user_id: str | None = None) -> ToolTraits:
        """Declared side effects of whatever `name` routes to (remote tools: not read-only)."""
        user_id = UserId.optional(user_id)
        self.ensure_initialized()
        hit = self._table.resolve(name, user_id)
        return ToolTraits() if hit is None else hit[1].traits

    def route(self, name: str, user_id: str | None = None) -> Tool | None:
        """The tool `name` resolves to now (None when nothing does), without loading anything."""
        user_id = UserId.optional(user_id)
        self.ensure_initialized()
        hit = self._table.resolve(name, user_id)
        return None if hit is None else hit[1]

    # ---- the ToolHost interface (what a tool sees of the router when it runs) ------------

    def builtin_context(self, name: str) -> BuiltInToolContext:
        ctx = current_builtin_tool_context() or self._default_context
        if ctx is None:
            raise ToolExecutionError(
                f"built-in tool {name!r} needs a BuiltInToolContext: push one with "
                "builtin_tool_context(...) or create the router with context=...",
                tool=name,
            )
        return ctx

    # ---- checkpoints (docs/safe-editing.md, "Checkpoints and rewind") ------------------------------

    def _checkpoint_context(self, context: BuiltInToolContext | None) -> BuiltInToolContext:
        ctx = context or current_builtin_tool_context() or self._default_context
        if ctx is None:
            raise ToolExecutionError(
                "checkpoints are of a BuiltInToolContext's workspace: pass context=..., push one with "
                "builtin_tool_context(...) or create the router with context=..."
            )
        return ctx

    def checkpoint(self, label: str = "", *, context: BuiltInToolContext | None = None) -> Checkpoint:
        """Take a checkpoint of the context's workspace (every file, whoever changed it)."""
        return self._checkpoint_context(context).checkpoints.take(label)

    def checkpoints(self, *, context: BuiltInToolContext | None = None) -> list[Checkpoint]:
        """The checkpoints held for the context's workspace, oldest first."""
        return self._checkpoint_context(context).checkpoints.list()

    def rewind(self, checkpoint_id: int, *, context: BuiltInToolContext | None = None) -> Rewind:
        """Put the context's workspace back as it was at `checkpoint_id`: every file changed
        since written back, every path created since removed, all or nothing; what cannot be put
        back is named in the report."""
        return self._checkpoint_context(context).checkpoints.rewind(checkpoint_id)

    # ---- execution ---------------------------------------------------------------------

    def _check_open(self, name: str) -> None:
        self.ensure_initialized()
        if self._closed:
            raise ToolExecutionError("the router is closed", tool=name)

    def resolve(self, name: str, user_id: str | None = None) -> Tool:
        """The tool `name` routes to for `user_id`, loading (lazily connected) tool lists first:
        that user's own, then, on a miss, the ones the name may be in."""
        uid = UserId.optional(user_id)
        policy = self.policy
        routed = name if policy is None else self._policy_name(policy, name, uid)
        tool, hit = self._routed(routed, uid)
        if tool is None:
            tool = run_sync(self._resolving(routed, uid, hit))
        return tool if policy is None else self._police_one(policy, tool, name, uid)

    async def aresolve(self, name: str, user_id: str | None = None) -> Tool:
        uid = UserId.optional(user_id)
        policy = self.policy
        routed = name if policy is None else self._policy_name(policy, name, uid)
        tool, hit = self._routed(routed, uid)
        if tool is None:
            tool = await run_async(self._resolving(routed, uid, hit))
        return tool if policy is None else self._police_one(policy, tool, name, uid)

    def _policy_name(self, policy: Policy, name: str, user_id: UserId | None) -> str:
        """The name a called one routes as (a renamed tool's old name); a name a rename
        replaced is not found, as it is not listed."""
        routed = policy.original_name(name)
        if routed is None:
            raise ToolNotFoundError(name, [], "")  # no suggestion: that would name the old one
        return routed

    def _police_one(self, policy: Policy, tool: Tool, name: str, user_id: UserId | None) -> Tool:
        policed = policy.police(tool, current_subject(user_id))
        if policed is None:  # hidden from this caller: as unknown as a name never registered
            raise ToolNotFoundError(name, [], "")
        return policed

    def _routed(self, name: str, user_id: UserId | None) -> tuple[Tool | None, tuple[ToolKind, Any] | None]:
        """The table's answer, and the tool when that answer stands alone (no gateway to ask, or
        a built-in, or a hit without a user's own tools to load first)."""
        self._check_open(name)
        hit = self._table.resolve(name, user_id)
        if self._gateway is None and hit is None:
            raise self._not_found(name, user_id)
        if hit is not None and (self._gateway is None or user_id is None or _is_builtin(hit)):
            tool: Tool = hit[1]
            return tool, hit
        return None, hit

    def _resolving(self, name: str, user_id: UserId | None, hit: tuple[ToolKind, Any] | None) -> Body[Tool]:
        """`resolve` with a gateway, from the table's first answer `hit`, written once: the
        gateway's loads are the only twinned steps."""
        gateway = self._gateway
        assert gateway is not None
        if user_id is not None and not _is_builtin(hit):
            yield Step(gateway.prepare, gateway.aprepare, (user_id,))  # a user's own tools come first
            hit = self._table.resolve(name, user_id)
        if hit is None:
            refreshed = False
            # A user-form name resolves only among a user's own tools: no global list to load.
            shared = not has_user_form(name)
            for uid in _refresh_scopes(gateway, name, user_id):
                refreshed = bool((yield Step(gateway.refresh, gateway.arefresh, (uid, shared)))) or refreshed
            if refreshed:
                hit = self._table.resolve(name, user_id)
        if hit is None:
            raise self._not_found(name, user_id)
        tool: Tool = hit[1]
        return tool

    def run(self, tool: Tool, argument: str | Mapping[str, Any] | None = None) -> ToolOutput:
        """Run exactly `tool` (e.g. one an `Exposure` holds); the text and the structured trace."""
        return self._run(tool, argument, _as_output)

    def _run(self, tool: Tool, argument: str | Mapping[str, Any] | None, finish: Callable[[Any], R]) -> R:
        """`run`, with the result turned into what the caller needs by `finish` (failures there
        are the tool's too): `invoke` needs only the text, not a `ToolOutput` around it."""
        if self._closed:
            raise ToolExecutionError("the router is closed", tool=tool.name)
        try:
            if type(argument) is str and _shallow(argument):
                call_text = getattr(tool, "call_text", None)  # tools that validate JSON in one pass
                if call_text is not None:
                    result = call_text(argument, self)
                    if result is not UNBOUND:
                        return finish(result)
            return finish(tool.call(parse_arguments(argument), self))
        except BaseException as exc:
            error = _as_tool_error(tool.name, exc)
            if error is exc:
                raise
            raise error from exc

    async def arun(self, tool: Tool, argument: str | Mapping[str, Any] | None = None) -> ToolOutput:
        """Async `run`: sync tools run in a worker thread (context variables carried over)."""
        if self._closed:
            raise ToolExecutionError("the router is closed", tool=tool.name)
        args = parse_arguments(argument)
        try:
            return _as_output(await tool.acall(args, self))
        except BaseException as exc:
            error = _as_tool_error(tool.name, exc)
            if error is exc:
                raise
            raise error from exc

    def execute(
        self, name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> ToolOutput:
        """Route and run one call; returns the model-facing text and the structured trace."""
        return self.run(self.resolve(name, user_id), argument)

    async def aexecute(
        self, name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> ToolOutput:
        """Async `execute`: sync tools run in a worker thread (context variables carried over)."""
        return await self.arun(await self.aresolve(name, user_id), argument)

    def invoke(
        self, function_name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> str:
        """The spec's `invoke(functionName, argument[, userId])`: the result as a string."""
        otel = _OTEL_MODULES.get("opentelemetry.trace")  # None: OpenTelemetry never loaded
        if otel is not None and getattr(otel, "_TRACER_PROVIDER", None) is not None:  # a provider is set
            return self._traced_invoke(otel, function_name, argument, user_id)
        if user_id is None and self.policy is None and self._initialized and not self._closed:
            # `resolve`'s answer without its steps: with no user, a hit stands alone (`_routed`);
            # under a policy every name goes through `resolve`, where the policy sees it
            hit = self._table.resolve(function_name, None)
            if hit is not None:
                return self._run(hit[1], argument, _as_text)
        return self._run(self.resolve(function_name, user_id), argument, _as_text)

    def _traced_invoke(
        self, otel: Any, function_name: str, argument: str | Mapping[str, Any] | None, user_id: str | None
    ) -> str:
        """`invoke` inside an `execute_tool` span (its general path: the span costs far more)."""
        tracer = _tracing.tracer(otel)
        call = functools.partial(self._run_text, function_name, argument, user_id)
        return call() if tracer is None else _tracing.traced(tracer, function_name, call)

    def _run_text(self, function_name: str, argument: str | Mapping[str, Any] | None, user_id: str | None) -> str:
        return self._run(self.resolve(function_name, user_id), argument, _as_text)

    async def ainvoke(
        self, function_name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> str:
        otel = _OTEL_MODULES.get(_tracing.OTEL_TRACE)
        if otel is not None:
            tracer = _tracing.tracer(otel)
            if tracer is not None:
                call = functools.partial(self.aexecute, function_name, argument, user_id)
                output: ToolOutput = await _tracing.atraced(tracer, function_name, call)
                return output.text
        return (await self.aexecute(function_name, argument, user_id)).text

    # ---- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """End everything the router owns: background processes, gateway sessions."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for callback in [*reversed(self._close_callbacks), *reversed(self._resources.seal())]:
            try:
                callback()
            except Exception as exc:
                errors.append(exc)
        if self._gateway is not None:
            try:
                self._gateway.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise ToolExecutionError(f"errors while closing the router: {errors!r}") from errors[0]

    def __enter__(self) -> ToolRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_builtin(hit: tuple[ToolKind, Any] | None) -> bool:
    """Built-ins win over everything (spec 6): no user's tool list can change where they route."""
    return hit is not None and hit[0] == ToolKind.BUILTIN


def _refresh_scopes(gateway: ToolGateway, name: str, user_id: UserId | None) -> list[str | None]:
    """Whose tool lists a miss should load: the caller's, or the users a user-form name may name
    (so per-user servers connect lazily too); never a user the caller did not name."""
    if user_id is not None or not has_user_form(name):
        return [user_id]
    return list(user_tool_owners(name, gateway.user_ids()))
