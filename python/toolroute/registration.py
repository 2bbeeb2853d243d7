"""Declaring tools: `@function_tool` (spec 7) and `@mcp_service` / `@mcp_tool` (spec 8).

The decorators only attach a description to the object; nothing is exposed until a router is told
to scan the package and a request names the tool in its allowlist.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, ClassVar, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from toolroute._sync import run_coroutine_sync
from toolroute.errors import ToolArgumentError, ToolRegistrationError
from toolroute.resulttext import DeclaredShape, result_text, return_type_problem
from toolroute.schema import function_definition, model_parameters
from toolroute.types import (
    UNBOUND,
    LocalTool,
    ToolDefinition,
    ToolHost,
    ToolKind,
    ToolOutput,
    ToolTraits,
    fresh,
    validate_request,
)

SPEC_ATTR = "__toolroute_spec__"
T = TypeVar("T")


@dataclass(frozen=True)
class FunctionToolSpec:
    """A function tool: validate arguments with `request_model`, then `call` the instance."""

    name: str
    description: str
    request_model: type[BaseModel]
    call: Callable[[BaseModel], Any]
    traits: ToolTraits
    is_async: bool
    # A declared pydantic model, TypedDict or dataclass result: listed as the tool's output schema,
    # each result carried as structured content beside its text.
    shape: DeclaredShape | None = None


@dataclass(frozen=True)
class FunctionTool(LocalTool):
    """A registered function tool, routable through the common `Tool` interface."""

    kind: ClassVar[ToolKind] = ToolKind.FUNCTION
    spec: FunctionToolSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def traits(self) -> ToolTraits:
        return self.spec.traits

    @property
    def is_async(self) -> bool:  # type: ignore[override]
        return self.spec.is_async

    @cached_property
    def _definition(self) -> ToolDefinition:
        return function_definition(self.spec.name, self.spec.description, model_parameters(self.spec.request_model))

    def definition(self) -> ToolDefinition:
        return fresh(self._definition)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return None if self.spec.shape is None else self.spec.shape.schema

    def bind(self, arguments: Mapping[str, Any], host: ToolHost) -> Callable[[], Any]:
        return self._thunk(validate_request(self.spec.name, self.spec.request_model, arguments))

    def bind_text(self, text: str, host: ToolHost) -> Callable[[], Any] | None:
        # One pass in pydantic-core (parse and validate), the common case of a model's call; any
        # failure goes the general way, whose messages name the problem for the model.
        try:
            return self._thunk(self.spec.request_model.model_validate_json(text))
        except ValidationError:
            return None

    def call_text(self, text: str, host: ToolHost) -> Any:
        # `bind_text` then the thunk, without the closures on the common path: a sync tool with
        # no declared shape is called straight on the validated request (issue 62, item 3).
        spec = self.spec
        try:
            # what `model_validate_json(text)` runs, without its keyword plumbing per call
            request = spec.request_model.__pydantic_validator__.validate_json(text)
        except ValidationError:
            return UNBOUND
        if spec.shape is None and not spec.is_async:
            return spec.call(request)
        thunk = self._thunk(request)
        return run_coroutine_sync(thunk) if spec.is_async else thunk()

    def _thunk(self, request: Any) -> Callable[[], Any]:
        run = self.spec.call
        return shaped(lambda: run(request), self.spec.shape, self.is_async)


@dataclass(frozen=True)
class McpToolSpec:
    """One `@mcp_tool` method; `exposed_name` is set when its service is registered."""

    tool_name: str
    description: str
    method_name: str
    traits: ToolTraits


@dataclass(frozen=True)
class McpServiceSpec:
    name: str
    description: str
    cls: type
    tools: tuple[McpToolSpec, ...] = field(default=())


def _description(obj: object, given: str | None) -> str:
    return given if given is not None else (inspect.getdoc(obj) or "").strip()


def _strict_config() -> ConfigDict:
    # By alias only: a parameter stored under an internal field name is reachable by its own name.
    return ConfigDict(extra="forbid", arbitrary_types_allowed=False, validate_by_alias=True, validate_by_name=False)


def _needs_internal_name(name: str) -> bool:
    """Pydantic cannot use these as field names: `_x` is private, and `model_config`, `json`,
    `copy`, ... shadow `BaseModel` attributes (`model_` is its namespace)."""
    return name.startswith("_") or name.startswith("model_") or hasattr(BaseModel, name)


def _internal_name(index: int, taken: set[str]) -> str:
    candidate = f"param_{index}"
    while candidate in taken or _needs_internal_name(candidate):
        candidate += "_"
    return candidate


@dataclass(frozen=True)
class SignatureModel:
    """A pydantic model of a function's parameters, and how a validated request calls the function.

    Every parameter keeps its own name in the schema and in validation. A name pydantic cannot
    take as a field name is stored under an internal one with the real name as its alias (the
    model validates by alias only, so the internal name is never accepted from a caller).
    """

    model: type[BaseModel]
    # (field name in the model, parameter name, positional-only), in signature order
    parameters: tuple[tuple[str, str, bool], ...]

    def arguments(self, request: BaseModel) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field_name, param, positional in self.parameters:
            value = getattr(request, field_name)
            if positional:
                args.append(value)
            else:
                kwargs[param] = value
        return args, kwargs


def signature_model(fn: Callable[..., Any], model_name: str, *, skip_self: bool = False) -> SignatureModel:
    """A pydantic model of `fn`'s parameters (order, defaults and `Field` metadata kept)."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    parameters: list[tuple[str, str, bool]] = []
    params = list(inspect.signature(fn).parameters.values())
    if skip_self and params:
        params = params[1:]
    taken = {p.name for p in params}
    for index, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolRegistrationError(f"{fn.__qualname__}: *args/**kwargs cannot be described as a tool schema")
        if p.name not in hints:
            raise ToolRegistrationError(f"{fn.__qualname__}: parameter {p.name!r} needs a type hint")
        default = ... if p.default is inspect.Parameter.empty else p.default
        hint = hints[p.name]
        field_name = p.name
        if _needs_internal_name(p.name):
            field_name = _internal_name(index, taken)
            taken.add(field_name)
            hint = Annotated[hint, Field(alias=p.name)]
        fields[field_name] = (hint, default)
        parameters.append((field_name, p.name, p.kind is p.POSITIONAL_ONLY))
    model = create_model(model_name, __config__=_strict_config(), **fields)
    return SignatureModel(model, tuple(parameters))


def _request_model_of_class(cls: type) -> type[BaseModel]:
    apply = getattr(cls, "apply", None)
    if not callable(apply):
        raise ToolRegistrationError(f"{cls.__qualname__}: a function tool class needs an apply(request) method")
    hints = get_type_hints(apply)
    params = [p for p in inspect.signature(apply).parameters.values() if p.name != "self"]
    candidate = hints.get(params[0].name) if params else None
    if candidate is None:
        candidate = getattr(cls, "Request", None)
    if not (isinstance(candidate, type) and issubclass(candidate, BaseModel)):
        raise ToolRegistrationError(f"{cls.__qualname__}.apply must take one parameter annotated with a pydantic model")
    return candidate


def declared_shape(fn: Callable[..., Any]) -> DeclaredShape | None:
    """The object shape `fn` declares it returns, if any (see `DeclaredShape`)."""
    try:
        return DeclaredShape.of(get_type_hints(fn).get("return"))
    except Exception:  # unresolvable names: no shape
        return None


def shaped(thunk: Callable[[], Any], shape: DeclaredShape | None, is_async: bool) -> Callable[[], Any]:
    """`thunk`, its result given its declared shape as structured content beside the text."""
    if shape is None:
        return thunk

    def output(value: Any) -> Any:
        if isinstance(value, ToolOutput):
            return value  # the tool said exactly what it returns
        return ToolOutput(result_text(value), trace={"structured_content": shape.structured(value)})

    if is_async:

        async def typed() -> Any:
            return output(await thunk())

        return typed
    return lambda: output(thunk())


def _check_return_type(fn: Callable[..., Any], name: str) -> None:
    """Refuse, before any call, a tool whose declared return type cannot become a result."""
    try:
        declared = get_type_hints(fn).get("return")
    except Exception:  # unresolvable names: the result is checked when the tool returns
        return
    if isinstance(declared, type) and declared.__name__ == "ToolOutput":
        return  # passed through as is
    problem = return_type_problem(declared)
    if problem is not None:
        raise ToolRegistrationError(f"function tool {name!r} cannot be registered: {problem}")


def _build_function_spec(
    target: Any, name: str | None, description: str | None, traits: ToolTraits
) -> FunctionToolSpec:
    runs: Any = getattr(target, "apply", None) if inspect.isclass(target) else target
    shape = None
    if callable(runs):
        _check_return_type(runs, str(name or getattr(target, "__name__", "?")))
        shape = declared_shape(runs)
    if inspect.isclass(target):
        model = _request_model_of_class(target)
        instance: Any = target()
        return FunctionToolSpec(
            name=name or target.__name__,
            description=_description(target, description),
            request_model=model,
            call=instance.apply,
            traits=traits,
            is_async=inspect.iscoroutinefunction(instance.apply),
            shape=shape,
        )
    if not callable(target):
        raise ToolRegistrationError(f"@function_tool needs a class or a function, got {target!r}")
    signature = signature_model(target, f"{target.__name__}_request")

    def call(request: BaseModel) -> Any:
        args, kwargs = signature.arguments(request)
        return target(*args, **kwargs)

    async def acall(request: BaseModel) -> Any:
        args, kwargs = signature.arguments(request)
        return await target(*args, **kwargs)

    is_async = inspect.iscoroutinefunction(target)
    return FunctionToolSpec(
        name=name or target.__name__,
        description=_description(target, description),
        request_model=signature.model,
        call=acall if is_async else call,
        traits=traits,
        is_async=is_async,
        shape=shape,
    )


@typing.overload
def function_tool(target: T, /) -> T: ...
@typing.overload
def function_tool(
    *,
    name: str | None = ...,
    description: str | None = ...,
    read_only: bool = ...,
    idempotent: bool = ...,
    quick: bool | None = ...,
) -> Callable[[T], T]: ...
def function_tool(
    target: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    quick: bool | None = None,
) -> Any:
    """Declare a function tool: a class with `apply(request: Model)`, or a typed function.

    The schema comes from the pydantic model (or the function's signature). `read_only` and
    `idempotent` tell the agent layer whether the tool may run in parallel and be retried. `quick`
    says how async callers run a sync tool: True (it never blocks) inline, without a worker
    thread; False (it may block, e.g. on the network) always on a worker thread; None, the
    default, measured: on a worker thread until its runs prove short, then inline (`_pace.py`).
    """
    traits = ToolTraits(read_only=read_only, idempotent=idempotent, quick=quick)

    def decorate(obj: T) -> T:
        setattr(obj, SPEC_ATTR, _build_function_spec(obj, name, description, traits))
        return obj

    return decorate(target) if target is not None else decorate


def mcp_tool(
    target: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    quick: bool | None = None,
) -> Any:
    """Mark a method of an `@mcp_service` class as a local MCP tool (traits as `function_tool`'s)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = McpToolSpec(
            tool_name=name or fn.__name__,
            description=_description(fn, description),
            method_name=fn.__name__,
            traits=ToolTraits(read_only=read_only, idempotent=idempotent, quick=quick),
        )
        setattr(fn, SPEC_ATTR, spec)
        return fn

    return decorate(target) if target is not None else decorate


def mcp_service(name: str | None = None, *, description: str | None = None) -> Callable[[type[T]], type[T]]:
    """Declare a local MCP service; its `@mcp_tool` methods become tools named by
    `generate_api_function_name(service, tool)`."""
    if callable(name) and not isinstance(name, str):
        raise ToolRegistrationError("use @mcp_service() or @mcp_service('name'), with parentheses")

    def decorate(cls: type[T]) -> type[T]:
        tools = tuple(
            getattr(member, SPEC_ATTR)
            for _, member in inspect.getmembers(cls, inspect.isfunction)
            if isinstance(getattr(member, SPEC_ATTR, None), McpToolSpec)
        )
        if not tools:
            raise ToolRegistrationError(f"@mcp_service {cls.__qualname__} has no @mcp_tool methods")
        service = McpServiceSpec(
            name=name or cls.__name__, description=_description(cls, description), cls=cls, tools=tools
        )
        setattr(cls, SPEC_ATTR, service)
        return cls

    return decorate


@dataclass(frozen=True)
class BoundMcpTool(LocalTool):
    """A local MCP tool ready to run: arguments are converted one parameter at a time (spec 8)."""

    kind: ClassVar[ToolKind] = ToolKind.LOCAL_MCP
    exposed_name: str
    service: str
    spec: McpToolSpec
    method: Callable[..., Any]
    schema_model: type[BaseModel]
    adapters: Mapping[str, tuple[TypeAdapter[Any], Any]]
    is_async: bool
    service_spec: McpServiceSpec | None = field(default=None, compare=False, repr=False)
    shape: DeclaredShape | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.exposed_name

    @property
    def traits(self) -> ToolTraits:
        return self.spec.traits

    @cached_property
    def _definition(self) -> ToolDefinition:
        return function_definition(self.exposed_name, self.spec.description, model_parameters(self.schema_model))

    def definition(self) -> ToolDefinition:
        return fresh(self._definition)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return None if self.shape is None else self.shape.schema

    def bind(self, arguments: Mapping[str, Any], host: ToolHost) -> Callable[[], Any]:
        kwargs = self.convert(arguments)
        method = self.method
        return shaped(lambda: method(**kwargs), self.shape, self.is_async)

    def convert(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Spec 8: convert each argument by its parameter's type hint."""
        unknown = sorted(set(args) - set(self.adapters))
        if unknown:
            raise ToolArgumentError(
                f"invalid arguments for {self.exposed_name!r}: unknown parameter(s) {', '.join(unknown)}; "
                f"expected {', '.join(self.adapters) or 'none'}"
            )
        kwargs: dict[str, Any] = {}
        for pname, (adapter, info) in self.adapters.items():
            if pname not in args:
                if info.is_required():
                    raise ToolArgumentError(f"invalid arguments for {self.exposed_name!r}: {pname}: Field required")
                kwargs[pname] = info.get_default(call_default_factory=True)
                continue
            try:
                kwargs[pname] = adapter.validate_python(args[pname])
            except ValidationError as exc:
                details = "; ".join(e["msg"] for e in exc.errors(include_url=False))
                raise ToolArgumentError(f"invalid arguments for {self.exposed_name!r}: {pname}: {details}") from None
        return kwargs

    @classmethod
    def bind_method(
        cls, exposed_name: str, service: McpServiceSpec, instance: object, spec: McpToolSpec, **extra: Any
    ) -> BoundMcpTool:
        method = getattr(instance, spec.method_name)
        unbound = getattr(service.cls, spec.method_name)
        signature = signature_model(unbound, f"{exposed_name}_request", skip_self=True)
        model = signature.model
        adapters: dict[str, tuple[TypeAdapter[Any], Any]] = {}
        for field_name, pname, _ in signature.parameters:
            info = model.model_fields[field_name]
            assert isinstance(info, FieldInfo)
            hint: Any = info.annotation
            if info.metadata:
                hint = typing.Annotated[(hint, *info.metadata)]
            adapters[pname] = (TypeAdapter(hint), info)
        return cls(
            exposed_name=exposed_name,
            service=service.name,
            spec=spec,
            method=method,
            schema_model=model,
            adapters=adapters,
            is_async=inspect.iscoroutinefunction(method),
            service_spec=service,
            shape=declared_shape(unbound),
        )
