"""A local tool's return value -> the text a model reads (spec 7): always valid JSON.

A `str` passes through as is. Anything else becomes JSON text (`json.loads` accepts every
output), with these choices for what JSON cannot say directly:

- NaN and infinities become the strings "NaN", "Infinity" and "-Infinity" (JSON has no such
  numbers; a string keeps the meaning where `null` would lose it);
- bytes are decoded as UTF-8 when they are, else `{"base64": "..."}`;
- tuples, sets and frozensets become lists (sets sorted when their items allow it);
- `Decimal` and `Fraction` become an integer or float when that is exact, else a string of
  their exact value ("0.1000000000000000000001", "1/3");
- number-like objects (NumPy, mpmath, ...) go through `__index__`, or `__float__` when exact,
  else their `str()`; dataclasses field by field, pydantic models through `model_dump()` (their
  own serialisers run), then these same rules; enums, dates, UUIDs and paths through pydantic;
- mapping keys become strings.

A value with no JSON form at all raises `UnserializableResult` naming its type; where the tool
declares such a return type, `return_type_problem` tells at registration, before it ever runs.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

MAX_DEPTH = 200  # nesting beyond this is almost surely a cycle


class UnserializableResult(TypeError):
    """A tool returned a value that has no JSON form."""


def _float(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _bytes(value: bytes | bytearray | memoryview) -> Any:
    data = bytes(value)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _exact_number(value: Decimal | Fraction) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite():
            return "NaN" if value.is_nan() else ("Infinity" if value > 0 else "-Infinity")
        if abs(value.adjusted()) > 400:  # beyond float range; an int of it could be huge
            return str(value)
    if value == int(value):
        return int(value)
    as_float = float(value)
    if type(value)(as_float) == value:
        return as_float
    return str(value)


def _number_like(value: Any) -> Any:
    """NumPy scalars, mpmath numbers and the like; `None` when `value` is not number-like."""
    if hasattr(type(value), "__index__"):
        return int(value.__index__())
    if hasattr(type(value), "__float__"):
        as_float = float(value)
        try:
            exact = bool(value == as_float) or math.isnan(as_float)
        except Exception:
            exact = False
        return _float(as_float) if exact else str(value)
    if hasattr(type(value), "__int__"):
        return int(value)
    return None


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(_float(key) if isinstance(key, float) else key)
    return str(key)


def _plain(value: Any, depth: int) -> Any:
    """`value` as JSON-native Python values (dict, list, str, int, finite float, bool, None)."""
    if depth > MAX_DEPTH:
        raise UnserializableResult(f"result is nested deeper than {MAX_DEPTH} levels (a cycle?)")
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)  # an IntEnum or int subclass as its value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes(value)
    if isinstance(value, (Decimal, Fraction)):
        return _exact_number(value)
    if isinstance(value, Mapping):
        return {_key(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        items = list(value)
        with contextlib.suppress(TypeError):  # mixed types: any order is as good as another
            items.sort()
        value = items
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, depth + 1) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):  # its own serialisers run; the rules above then apply
        return _plain(value.model_dump(), depth + 1)

    def number_or_refuse(obj: Any) -> Any:  # for what pydantic does not know (UUIDs it does)
        number = _number_like(obj)
        if number is None:
            raise UnserializableResult(f"the result holds a {type(obj).__qualname__}, which has no JSON form")
        return number

    try:
        jsonable = pydantic_core.to_jsonable_python(value, fallback=number_or_refuse, bytes_mode="base64")
    except pydantic_core.PydanticSerializationError as exc:
        raise UnserializableResult(f"the result cannot be serialised: {exc}") from None
    return _plain(jsonable, depth + 1)  # NaN inside a model, keys of odd types


def result_text(result: Any) -> str:
    """The model's text for a tool's return value: a `str` unchanged, anything else JSON.

    pydantic-core writes the JSON (3 to 10x faster than `json.dumps`; floats in their shortest
    round-trip form, e.g. `0.00001` for `1e-05`); text it cannot encode as UTF-8 (a lone
    surrogate) is left to `json.dumps`, as before."""
    if isinstance(result, str):
        return result
    kind = type(result)
    if kind is int and -_INT_FAST < result < _INT_FAST:
        return str(result)  # the JSON of a plain int, without the walk
    if kind is bool:
        return "true" if result else "false"
    if result is None:
        return "null"
    plain = _plain(result, 0)
    try:
        return pydantic_core.to_json(plain).decode()
    except pydantic_core.PydanticSerializationError:
        return json.dumps(plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_INT_FAST = 1 << 63  # ints this small print the same through str() and JSON, well within Python's digit limit
_JSON_ABLE = (str, int, float, bool, bytes, bytearray, memoryview, Decimal, Fraction, Mapping)
_CONTAINERS = (list, tuple, set, frozenset)
_NUMBER_HOOKS = ("__index__", "__float__", "__int__")


def return_type_problem(annotation: Any) -> str | None:
    """Why values of a declared return type can have no JSON form, or None when they can (or it
    cannot be told: `Any`, unions, generics and unresolved names are left to the call)."""
    if not isinstance(annotation, type) or annotation is object or issubclass(annotation, _JSON_ABLE + _CONTAINERS):
        return None
    if dataclasses.is_dataclass(annotation) or any(hasattr(annotation, m) for m in _NUMBER_HOOKS):
        return None
    try:
        TypeAdapter(annotation).json_schema(mode="serialization")
    except Exception:
        return (
            f"its return type {annotation.__qualname__} has no JSON form; "
            "return str, numbers, lists, dicts, dataclasses or pydantic models"
        )
    return None


@dataclasses.dataclass(frozen=True)
class DeclaredShape:
    """A typed tool's declared result (a pydantic model, a TypedDict or a dataclass): the JSON
    Schema it is listed with (MCP `outputSchema`) and the structured value each result carries
    beside its text (`structuredContent`), as the mcp SDK and fastmcp do for their typed tools.
    The model's text is the same JSON as without a shape."""

    adapter: TypeAdapter[Any]
    schema: dict[str, Any]

    @classmethod
    def of(cls, annotation: Any) -> DeclaredShape | None:
        """The shape of a declared return type, or None when it declares no object shape."""
        typed = isinstance(annotation, type) and (
            issubclass(annotation, BaseModel) or is_typeddict(annotation) or dataclasses.is_dataclass(annotation)
        )
        if not typed:
            return None
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        try:
            schema = adapter.json_schema(mode="serialization")
        except Exception:  # a field pydantic cannot describe: listed without a shape
            return None
        return cls(adapter, schema) if schema.get("type") == "object" else None

    def structured(self, value: Any) -> dict[str, Any]:
        """`value` as the declared shape's JSON object. Raises `UnserializableResult` when it is
        not one: a result that breaks its own schema is an error, as the SDK's server makes it."""
        try:
            dumped = self.adapter.dump_python(self.adapter.validate_python(value), mode="json")
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "(the value)"
            raise UnserializableResult(
                f"the result does not match the declared {self.schema.get('title', 'type')}: {where}: {first['msg']}"
            ) from None
        except Exception as exc:
            raise UnserializableResult(f"the result cannot be given its declared shape: {exc}") from None
        if not isinstance(dumped, dict):
            raise UnserializableResult("the result's declared shape is not a JSON object")
        return dumped
