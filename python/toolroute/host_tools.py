"""The host's own tools in the routing table: function tools and local MCP services, registered
one by one, by scanning packages, or from plugins' entry points; each unit (a module, an entry
point, the objects of one call) registers whole or not at all.

The table is the router's one registry (the Rust `RouteTable`); this module only writes the host
levels of it (LOCAL_MCP and FUNCTION). The router holds one `HostTools` and asks it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import pkgutil
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from toolroute._core import RouteTable, ToolKind
from toolroute.errors import ToolRegistrationError
from toolroute.naming import generate_api_function_name, is_valid_tool_name
from toolroute.registration import SPEC_ATTR, BoundMcpTool, FunctionTool, FunctionToolSpec, McpServiceSpec

ENTRY_POINT_GROUP = "toolroute.tools"


@dataclass(frozen=True)
class _Unit:
    """One registration unit (a module, a service, an object): all of it or none of it."""

    label: str
    objects: tuple[Any, ...]


class HostTools:
    """Registration into `table`'s host levels, under one lock."""

    def __init__(self, table: RouteTable, lock: threading.RLock) -> None:
        self._table = table
        self._lock = lock
        self._registered_modules: set[str] = set()
        self.services: dict[str, list[str]] = {}  # local MCP service -> its exposed names, in order

    def scan(self, *packages: str | ModuleType) -> None:
        """Import each package and every submodule, registering the tools defined there.

        Each module is one unit: all its tools register or none do, and the error names the
        module and the cause. A module already registered (by an earlier scan of an enclosing
        package, or an entry point) is skipped, so scanning is idempotent."""
        with self._lock:
            for package in packages:
                for module in self._walk(package):
                    self._register_module(module)

    @staticmethod
    def _import(name: str) -> ModuleType:
        try:
            return importlib.import_module(name)
        except Exception as exc:
            raise ToolRegistrationError(f"cannot import tool module {name!r}: {type(exc).__name__}: {exc}") from exc

    def _walk(self, package: str | ModuleType) -> Iterable[ModuleType]:
        module = self._import(package) if isinstance(package, str) else package
        yield module
        path = getattr(module, "__path__", None)
        if path is None:
            return
        for info in pkgutil.walk_packages(path, prefix=module.__name__ + ".", onerror=self._walk_error):
            yield self._import(info.name)

    @staticmethod
    def _walk_error(name: str) -> None:
        raise ToolRegistrationError(f"cannot import tool package {name!r} while scanning it")

    def _register_module(self, module: ModuleType) -> None:
        if module.__name__ in self._registered_modules:
            return
        objects = tuple(
            value
            for value in list(vars(module).values())
            if getattr(value, "__module__", None) == module.__name__ and SPEC_ATTR in vars(value)
        )
        self._register_unit(_Unit(f"module {module.__name__!r}", objects))
        self._registered_modules.add(module.__name__)

    def load_entry_points(self) -> None:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:
                raise ToolRegistrationError(
                    f"cannot load entry point {ep.name!r} ({ep.value}): {type(exc).__name__}: {exc}"
                ) from exc
            if isinstance(obj, ModuleType):
                self.scan(obj)
            else:
                self._register_unit(_Unit(f"entry point {ep.name!r} ({ep.value})", (obj,)))

    def register(
        self, obj: Any, *, replace: bool = False, rename: Mapping[str, str] | None = None, prefix: str = ""
    ) -> list[str]:
        """Register a `@function_tool` or `@mcp_service` object; returns the exposed names.
        Registering the same object again is a no-op that returns the same names.

        A function tool is exposed under its declared name, or `rename[name]`, or `prefix + name`
        (e.g. a class of BFCL tools with a method named `grep`: `rename={"grep": "fs_grep"}`
        registers it beside the built-in). Without them a clash stays a loud refusal."""
        with self._lock:
            unit = _Unit(repr(obj), (obj,))
            return self._register_unit(unit, replace=replace, wrap=False, rename=_renaming(rename, prefix))

    def register_all(
        self, objects: Iterable[Any], *, rename: Mapping[str, str] | None = None, prefix: str = ""
    ) -> list[str]:
        """Register several objects as one unit (all or none), renamed as `register` says."""
        with self._lock:
            unit = _Unit("the objects given", tuple(objects))
            return self._register_unit(unit, rename=_renaming(rename, prefix))

    def _register_unit(
        self,
        unit: _Unit,
        *,
        replace: bool = False,
        wrap: bool = True,
        rename: Callable[[str], str] | None = None,
    ) -> list[str]:
        """Register every object of `unit`, or (on any error) none of them; `wrap` names the
        unit in the error; `rename` gives function tools their exposed names."""
        undo: list[Callable[[], None]] = []
        names: list[str] = []
        try:
            for obj in unit.objects:
                spec = getattr(obj, SPEC_ATTR, None)
                if isinstance(spec, FunctionToolSpec):
                    if rename is not None:
                        spec = dataclasses.replace(spec, name=rename(spec.name))
                    names.append(self._register_function(spec, replace, undo))
                elif isinstance(spec, McpServiceSpec):
                    names += self._register_service(spec, replace, undo)
                else:
                    raise ToolRegistrationError(f"{obj!r} is not decorated with @function_tool or @mcp_service")
        except Exception as exc:
            for step in reversed(undo):
                step()
            if not wrap:
                raise
            raise ToolRegistrationError(f"cannot register the tools of {unit.label}: {exc}") from exc
        return names

    def _register_function(self, spec: FunctionToolSpec, replace: bool, undo: list[Callable[[], None]]) -> str:
        if not is_valid_tool_name(spec.name):
            raise ToolRegistrationError(
                f"function tool name {spec.name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ (OpenAI and Anthropic require it)"
            )
        hit = self._table.resolve(spec.name)
        previous = hit[1] if hit is not None and hit[0] == ToolKind.FUNCTION else None
        if isinstance(previous, FunctionTool) and (previous.spec is spec or previous.spec == spec):
            return spec.name  # the same object again (an overlapping scan, an entry point, a rename)
        self._table.insert(ToolKind.FUNCTION, spec.name, FunctionTool(spec), replace)

        def restore() -> None:
            if previous is None:
                self._table.remove(spec.name)
            else:
                self._table.insert(ToolKind.FUNCTION, spec.name, previous, True)

        undo.append(restore)
        return spec.name

    def _register_service(self, service: McpServiceSpec, replace: bool, undo: list[Callable[[], None]]) -> list[str]:
        old = self.services.get(service.name)
        if old is not None:
            current = [self._table.resolve(n) for n in old]
            if all(h is not None and getattr(h[1], "service_spec", None) is service for h in current):
                return list(old)
            if not replace:
                raise ToolRegistrationError(f"local MCP service {service.name!r} is already registered")
        instance = service.cls()
        identities = [f"local:{service.name}\x00{tool.tool_name}" for tool in service.tools]
        planned = self._table.plan(
            ToolKind.LOCAL_MCP,
            [
                (ident, [generate_api_function_name(service.name, t.tool_name)])
                for ident, t in zip(identities, service.tools, strict=True)
            ],
        )
        bound: list[tuple[str, BoundMcpTool]] = []
        for ident, tool, name in zip(identities, service.tools, planned, strict=True):
            if name is None:
                raise ToolRegistrationError(f"no free name for local MCP tool {service.name}/{tool.tool_name}")
            bound.append((ident, BoundMcpTool.bind_method(name, service, instance, tool)))
        previous = {n: self._table.resolve(n) for n in old or ()}
        for name in old or ():
            self._table.remove(name)
        for ident, local in bound:
            self._table.insert(ToolKind.LOCAL_MCP, local.name, local, True, ident)
        names = [local.name for _, local in bound]
        self.services[service.name] = names

        def restore() -> None:
            for name in names:
                self._table.remove(name)
            for name, hit in previous.items():
                if hit is not None:
                    self._table.insert(
                        ToolKind.LOCAL_MCP, name, hit[1], True, f"local:{service.name}\x00{hit[1].spec.tool_name}"
                    )
            if old is None:
                self.services.pop(service.name, None)
            else:
                self.services[service.name] = old

        undo.append(restore)
        return names


def _renaming(rename: Mapping[str, str] | None, prefix: str) -> Callable[[str], str] | None:
    """The exposed name of a function tool declared as `name`: `rename[name]`, else prefixed."""
    if not rename and not prefix:
        return None
    table = dict(rename or {})
    return lambda name: table.get(name, prefix + name)
