"""ToolRouter: registration, allowlisted exposure and routing with the spec's precedence.

Precedence (spec 5): built-in, user-level remote MCP, local MCP, function tool, global gateway.
The lookup itself is the Rust `RouteTable`; this module validates arguments, runs the target and
turns every result into a string (spec 11), with `execute` also returning the structured trace.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.metadata
import json
import pkgutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import IntEnum
from types import ModuleType
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel, ValidationError

from toolroute._core import RouteTable
from toolroute._sync import run_coroutine_sync
from toolroute.builtins import BuiltinTool, ToolOutput, builtin_tools
from toolroute.context import BuiltInToolContext, current_builtin_tool_context
from toolroute.errors import (
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
)
from toolroute.gateway import ToolDefinition, ToolGateway
from toolroute.naming import (
    NameAllocator,
    generate_api_function_name,
    has_user_form,
    is_valid_tool_name,
    parse_user_service_key,
    user_form_candidates,
    validate_user_id,
)
from toolroute.registration import (
    SPEC_ATTR,
    BoundMcpTool,
    FunctionToolSpec,
    McpServiceSpec,
    ToolTraits,
)
from toolroute.resulttext import result_text
from toolroute.schema import function_definition, model_parameters

ENTRY_POINT_GROUP = "toolroute.tools"
R = TypeVar("R")

_active_router: contextvars.ContextVar[ToolRouter | None] = contextvars.ContextVar(
    "toolroute_active_router", default=None
)


def active_router() -> ToolRouter | None:
    """The router running the current built-in call (for tools that keep per-router state)."""
    return _active_router.get()


@contextmanager
def _running_in(router: ToolRouter) -> Iterator[None]:
    token = _active_router.set(router)
    try:
        yield
    finally:
        _active_router.reset(token)


class ToolKind(IntEnum):
    BUILTIN = 0
    USER_MCP = 1
    LOCAL_MCP = 2
    FUNCTION = 3
    GLOBAL_MCP = 4


def parse_arguments(argument: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON object string or a mapping; blank means no arguments."""
    if argument is None:
        return {}
    if isinstance(argument, Mapping):
        return dict(argument)
    if isinstance(argument, (bytes, bytearray)):
        argument = argument.decode("utf-8", "replace")
    if not isinstance(argument, str):
        raise ToolArgumentError(f"arguments must be a JSON object string or a mapping, got {type(argument).__name__}")
    if not argument.strip():
        return {}
    try:
        value = json.loads(argument)
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(value, dict):
        raise ToolArgumentError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return f"invalid arguments for {tool!r}: " + "; ".join(parts)


def validate_request(tool: str, model: type[BaseModel], args: Mapping[str, Any]) -> BaseModel:
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise ToolArgumentError(describe_validation_error(tool, exc)) from None


def _as_output(result: Any) -> ToolOutput:
    return result if isinstance(result, ToolOutput) else ToolOutput(result_text(result))


@contextmanager
def _failures_as_tool_errors(name: str) -> Iterator[None]:
    """toolroute's own errors pass through; anything else a tool raises is wrapped (and chained)."""
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:
        raise ToolExecutionError(f"tool {name!r} failed: {type(exc).__name__}: {exc}", tool=name) from exc
    except BaseException as exc:
        # pyo3's PanicException derives from BaseException; a core bug must not escape a caller's
        # `except Exception` and end an agent's whole batch.
        if type(exc).__module__ != "pyo3_runtime":
            raise
        raise ToolExecutionError(f"tool {name!r} hit an internal error in toolroute's core: {exc}", tool=name) from exc


class ToolRouter:
    """The unified tool router. Thread-safe for invocation; registration takes a lock."""

    def __init__(
        self,
        *,
        packages: Iterable[str | ModuleType] = (),
        entry_points: bool = False,
        gateway: ToolGateway | None = None,
        context: BuiltInToolContext | None = None,
        builtins: Mapping[str, BuiltinTool] | None = None,
    ) -> None:
        self._table = RouteTable()
        self._lock = threading.RLock()
        self._pending_packages: list[str | ModuleType] = list(packages)
        self._scanned: set[str] = set()
        self._entry_points = entry_points
        self._initialized = False
        self._functions: dict[str, FunctionToolSpec] = {}
        self._mcp_tools: dict[str, BoundMcpTool] = {}
        self._mcp_services: dict[str, list[str]] = {}
        self._mcp_names = NameAllocator()
        self._default_context = context
        self._gateway: ToolGateway | None = None
        self._closed = False
        self._close_callbacks: list[Callable[[], Any]] = []
        self._resources: dict[str, Any] = {}
        # The eight coding tools by default; a host may pass its own table (or an empty one).
        self._builtins: dict[str, BuiltinTool] = dict(builtin_tools() if builtins is None else builtins)
        for name, tool in self._builtins.items():
            self._table.insert(ToolKind.BUILTIN, name, tool)
        if gateway is not None:
            self.attach_gateway(gateway)

    # ---- registration ------------------------------------------------------------------

    def scan(self, *packages: str | ModuleType) -> None:
        """Import each package and every submodule once, registering the tools defined there."""
        with self._lock:
            for package in packages:
                module = importlib.import_module(package) if isinstance(package, str) else package
                if module.__name__ in self._scanned:
                    continue
                self._scanned.add(module.__name__)
                for mod in self._walk(module):
                    self._register_module(mod)

    @staticmethod
    def _walk(module: ModuleType) -> Iterable[ModuleType]:
        yield module
        path = getattr(module, "__path__", None)
        if path is None:
            return
        for info in pkgutil.walk_packages(path, prefix=module.__name__ + "."):
            yield importlib.import_module(info.name)

    def _register_module(self, module: ModuleType) -> None:
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) == module.__name__ and SPEC_ATTR in vars(value):
                self.register(value)

    def _load_entry_points(self) -> None:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            obj = ep.load()
            if isinstance(obj, ModuleType):
                self.scan(obj)
            else:
                self.register(obj)

    def ensure_initialized(self) -> None:
        """Scan the packages given at construction (and plugins) exactly once."""
        if self._initialized:
            return
        with self._lock:
            if self._initialized:
                return
            pending, self._pending_packages = self._pending_packages, []
            self.scan(*pending)
            if self._entry_points:
                self._load_entry_points()
            self._initialized = True

    def register(self, obj: Any, *, replace: bool = False) -> list[str]:
        """Register a `@function_tool` or `@mcp_service` object; returns the exposed names."""
        spec = getattr(obj, SPEC_ATTR, None)
        if isinstance(spec, FunctionToolSpec):
            return [self._register_function(spec, replace)]
        if isinstance(spec, McpServiceSpec):
            return self._register_service(spec, replace)
        raise ToolRegistrationError(f"{obj!r} is not decorated with @function_tool or @mcp_service")

    def _register_function(self, spec: FunctionToolSpec, replace: bool) -> str:
        if not is_valid_tool_name(spec.name):
            raise ToolRegistrationError(
                f"function tool name {spec.name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ (OpenAI and Anthropic require it)"
            )
        with self._lock:
            self._table.insert(ToolKind.FUNCTION, spec.name, spec, replace)
            self._functions[spec.name] = spec
        return spec.name

    def _register_service(self, service: McpServiceSpec, replace: bool) -> list[str]:
        with self._lock:
            if service.name in self._mcp_services:
                if not replace:
                    raise ToolRegistrationError(f"local MCP service {service.name!r} is already registered")
                self._unregister_service(service.name)
            instance = service.cls()
            names = []
            for tool in service.tools:
                key = f"{service.name}\x00{tool.tool_name}"
                name = self._mcp_names.allocate(key, generate_api_function_name(service.name, tool.tool_name))
                bound = BoundMcpTool.bind(name, service, instance, tool)
                self._table.insert(ToolKind.LOCAL_MCP, name, bound)
                self._mcp_tools[name] = bound
                names.append(name)
            self._mcp_services[service.name] = names
            return names

    def _unregister_service(self, service: str) -> None:
        for name in self._mcp_services.pop(service, []):
            self._table.remove(ToolKind.LOCAL_MCP, name)
            bound = self._mcp_tools.pop(name)
            self._mcp_names.release(f"{service}\x00{bound.spec.tool_name}")

    def attach_gateway(self, gateway: ToolGateway) -> None:
        with self._lock:
            if self._gateway is not None:
                raise ToolRegistrationError("this router already has a gateway")
            gateway.attach(self._table)
            self._gateway = gateway

    @property
    def gateway(self) -> ToolGateway | None:
        return self._gateway

    @property
    def table(self) -> RouteTable:
        return self._table

    def on_close(self, callback: Callable[[], Any]) -> None:
        """Run `callback()` when the router closes (background processes, sessions...)."""
        self._close_callbacks.append(callback)

    def resource(self, key: str, factory: Callable[[], R]) -> R:
        """Per-router state of a tool (e.g. bash's process table), made once; an object with a
        `close()` method is closed when the router closes."""
        with self._lock:
            if key not in self._resources:
                value = factory()
                self._resources[key] = value
                close = getattr(value, "close", None)
                if callable(close):
                    self.on_close(close)
            return self._resources[key]

    # ---- exposure ----------------------------------------------------------------------

    def _not_found(self, name: str, user_id: str | None, detail: str = "") -> ToolNotFoundError:
        return ToolNotFoundError(name, self._table.suggest(name, user_id), detail)

    def definition(self, name: str) -> ToolDefinition:
        """The definition of one local tool (built-in, local MCP or function), by exposed name."""
        if name in self._builtins:
            tool = self._builtins[name]
            return function_definition(name, tool.description, model_parameters(tool.request_model))
        if name in self._mcp_tools:
            bound = self._mcp_tools[name]
            return function_definition(name, bound.spec.description, model_parameters(bound.schema_model))
        if name in self._functions:
            spec = self._functions[name]
            return function_definition(name, spec.description, model_parameters(spec.request_model))
        raise self._not_found(name, None)

    def get_all_function_tools(self, function_list: Sequence[str] | None) -> list[ToolDefinition]:
        """Definitions of exactly the named local tools; an unknown name is an error."""
        self.ensure_initialized()
        seen: dict[str, ToolDefinition] = {}
        for name in function_list or ():
            if name not in seen:
                seen[name] = self.definition(name)
        return list(seen.values())

    def get_local_mcp_tools(self, service_names: Sequence[str]) -> list[ToolDefinition]:
        self.ensure_initialized()
        out: list[ToolDefinition] = []
        for service in service_names:
            if service not in self._mcp_services:
                raise ToolNotFoundError(service, [], "no such local MCP service")
            out.extend(self.definition(n) for n in self._mcp_services[service])
        return out

    def _require_gateway(self, what: str) -> ToolGateway:
        if self._gateway is None:
            raise ToolNotFoundError(what, [], "no MCP gateway is attached to this router")
        return self._gateway

    def get_global_mcp_tools(self, mcp_server_ids: Sequence[str] | None) -> list[ToolDefinition]:
        ids = list(mcp_server_ids or ())
        if not ids:
            return []
        return self._require_gateway(ids[0]).get_global_mcp_tools(ids)

    def get_user_mcp_tools(self, mcp_server_ids: Sequence[str] | None, user_id: str) -> list[ToolDefinition]:
        ids = list(mcp_server_ids or ())
        if not ids:
            return []
        return self._require_gateway(ids[0]).get_user_mcp_tools(ids, user_id)

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
        tools = self.get_all_function_tools(function_list)
        local, remote, per_user = [], [], []
        for sid in mcp_server_ids or ():
            user_form = parse_user_service_key(sid)
            if user_form is not None:
                if user_id is not None and user_form[0] != user_id:
                    raise ToolArgumentError(f"MCP service {sid!r} belongs to another user than {user_id!r}")
                per_user.append(user_form)
            elif sid in self._mcp_services:
                local.append(sid)
            else:
                remote.append(sid)
        tools += self.get_local_mcp_tools(local)
        if remote:
            tools += self.get_user_mcp_tools(remote, user_id) if user_id else self.get_global_mcp_tools(remote)
        for uid, sid in per_user:
            tools += self.get_user_mcp_tools([sid], uid)
        return _dedupe(tools)

    def traits(self, name: str, user_id: str | None = None) -> ToolTraits:
        """Declared side effects of whatever `name` routes to (remote tools: not read-only)."""
        self.ensure_initialized()
        hit = self._table.resolve(name, user_id)
        if hit is None:
            return ToolTraits()
        kind, target = hit
        if kind == ToolKind.BUILTIN:
            return ToolTraits(read_only=target.read_only, idempotent=target.read_only)
        if kind == ToolKind.FUNCTION:
            return target.traits
        if kind == ToolKind.LOCAL_MCP:
            return target.spec.traits
        return ToolTraits()

    # ---- execution ---------------------------------------------------------------------

    def _resolve(self, name: str, user_id: str | None) -> tuple[int, Any]:
        self.ensure_initialized()
        if self._closed:
            raise ToolExecutionError("the router is closed", tool=name)
        hit = self._table.resolve(name, user_id)
        if hit is None and self._gateway is not None:
            refreshed = [self._gateway.refresh(uid) for uid in _refresh_scopes(name, user_id)]
            if any(refreshed):
                hit = self._table.resolve(name, user_id)
        if hit is None:
            raise self._not_found(name, user_id)
        return hit

    async def _aresolve(self, name: str, user_id: str | None) -> tuple[int, Any]:
        self.ensure_initialized()
        if self._closed:
            raise ToolExecutionError("the router is closed", tool=name)
        hit = self._table.resolve(name, user_id)
        if hit is None and self._gateway is not None:
            refreshed = [await self._gateway.arefresh(uid) for uid in _refresh_scopes(name, user_id)]
            if any(refreshed):
                hit = self._table.resolve(name, user_id)
        if hit is None:
            raise self._not_found(name, user_id)
        return hit

    def _context(self, name: str) -> BuiltInToolContext:
        ctx = current_builtin_tool_context() or self._default_context
        if ctx is None:
            raise ToolExecutionError(
                f"built-in tool {name!r} needs a BuiltInToolContext: push one with "
                "builtin_tool_context(...) or create the router with context=...",
                tool=name,
            )
        return ctx

    def _mcp_kwargs(self, bound: BoundMcpTool, args: Mapping[str, Any]) -> dict[str, Any]:
        """Spec 8: convert each argument by its parameter's type hint."""
        unknown = sorted(set(args) - set(bound.adapters))
        if unknown:
            raise ToolArgumentError(
                f"invalid arguments for {bound.exposed_name!r}: unknown parameter(s) {', '.join(unknown)}; "
                f"expected {', '.join(bound.adapters) or 'none'}"
            )
        kwargs: dict[str, Any] = {}
        for pname, (adapter, info) in bound.adapters.items():
            if pname not in args:
                if info.is_required():
                    raise ToolArgumentError(f"invalid arguments for {bound.exposed_name!r}: {pname}: Field required")
                kwargs[pname] = info.get_default(call_default_factory=True)
                continue
            try:
                kwargs[pname] = adapter.validate_python(args[pname])
            except ValidationError as exc:
                details = "; ".join(e["msg"] for e in exc.errors(include_url=False))
                raise ToolArgumentError(f"invalid arguments for {bound.exposed_name!r}: {pname}: {details}") from None
        return kwargs

    def _bind_local(self, name: str, kind: int, target: Any, args: Mapping[str, Any]) -> tuple[Callable[[], Any], bool]:
        """Validate the arguments of a local call; returns (thunk, thunk_is_async)."""
        if kind == ToolKind.BUILTIN:
            ctx = self._context(name)
            request = validate_request(name, target.request_model, args)
            return (lambda: target.handler(request, ctx)), False
        if kind == ToolKind.LOCAL_MCP:
            kwargs = self._mcp_kwargs(target, args)
            return (lambda: target.method(**kwargs)), target.is_async
        request = validate_request(name, target.request_model, args)
        return (lambda: target.call(request)), target.is_async

    def execute(
        self, name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> ToolOutput:
        """Route and run one call; returns the model-facing text and the structured trace."""
        kind, target = self._resolve(name, user_id)
        args = parse_arguments(argument)
        with _failures_as_tool_errors(name):
            if kind in (ToolKind.USER_MCP, ToolKind.GLOBAL_MCP):
                assert self._gateway is not None
                return self._gateway.call(target, args)
            thunk, is_async = self._bind_local(name, kind, target, args)
            with _running_in(self):
                return _as_output(run_coroutine_sync(thunk) if is_async else thunk())

    async def aexecute(
        self, name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> ToolOutput:
        """Async `execute`: sync tools run in a worker thread (context variables carried over)."""
        kind, target = await self._aresolve(name, user_id)
        args = parse_arguments(argument)
        with _failures_as_tool_errors(name):
            if kind in (ToolKind.USER_MCP, ToolKind.GLOBAL_MCP):
                assert self._gateway is not None
                return await self._gateway.acall(target, args)
            thunk, is_async = self._bind_local(name, kind, target, args)
            with _running_in(self):
                return _as_output(await thunk() if is_async else await anyio.to_thread.run_sync(thunk))

    def invoke(
        self, function_name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> str:
        """The spec's `invoke(functionName, argument[, userId])`: the result as a string."""
        return self.execute(function_name, argument, user_id).text

    async def ainvoke(
        self, function_name: str, argument: str | Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> str:
        return (await self.aexecute(function_name, argument, user_id)).text

    # ---- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """End everything the router owns: background processes, gateway sessions."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for callback in reversed(self._close_callbacks):
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


def _refresh_scopes(name: str, user_id: str | None) -> list[str | None]:
    """Whose tool lists a miss should load: the caller's, or the users a user-form name may name
    (so per-user servers connect lazily too); never a user the caller did not name."""
    if user_id is not None or not has_user_form(name):
        return [user_id]
    return [uid for uid, _ in user_form_candidates(name) if _valid_user_id(uid)]


def _valid_user_id(user_id: str) -> bool:
    try:
        validate_user_id(user_id)
    except ToolArgumentError:
        return False
    return True


def _dedupe(tools: list[ToolDefinition]) -> list[ToolDefinition]:
    seen: set[str] = set()
    out = []
    for tool in tools:
        name = tool["function"]["name"]
        if name not in seen:
            seen.add(name)
            out.append(tool)
    return out
