"""What a program may call: each exposed tool under a Python name, with a signature to show.

Names that are not Python identifiers (`user_7_tool_get-weather`, `fs.read`) get one (every
character but ASCII letters, digits and `_` becomes `_`; a keyword gains a trailing `_`, a clash
a number); `tools.call(name, ...)` takes the exposed name itself. Signatures come from the tools'
JSON schemas, keyword-only as the arguments are.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolroute.types import Tool

# ASCII only: a non-ASCII identifier is NFKC-normalised by the parser, so two distinct tool names
# could meet in one Python name (and some letters, such as superscripts, cannot start one).
_NOT_IN_NAME = re.compile(r"[^0-9A-Za-z_]|^(?=[0-9])")
_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}
SUMMARY_CHARS = 160  # the first sentence of a description, at most this long, beside a signature
ENUM_SHOWN = 6  # a longer enum shows as its base type


@dataclass(frozen=True)
class Entry:
    """One callable tool: its Python name, the tool, and how the program sees it."""

    python_name: str
    tool: Tool
    signature: str
    summary: str
    doc: str


def python_name(name: str, taken: set[str]) -> str:
    base = _NOT_IN_NAME.sub("_", name)
    if keyword.iskeyword(base) or base in {"tools", "call", "ToolError"}:
        base += "_"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


def annotation(schema: Mapping[str, Any]) -> str:
    """A short Python annotation for a JSON schema (what a model needs to call, not a validator)."""
    if "enum" in schema and 0 < len(schema["enum"]) <= ENUM_SHOWN:
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            parts = dict.fromkeys(annotation(s) for s in schema[union] if isinstance(s, Mapping))
            return " | ".join(parts) or "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_JSON_TYPES.get(k, "Any") for k in kind if isinstance(k, str)) or "Any"
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"list[{annotation(schema['items'])}]"
    return _JSON_TYPES.get(kind, "Any") if isinstance(kind, str) else "Any"


def signature(python: str, parameters: Mapping[str, Any]) -> str:
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = set(parameters.get("required") or ())
    shown = []
    for name in sorted(properties, key=lambda n: n not in required):  # required first, else in order
        schema = properties[name] if isinstance(properties[name], Mapping) else {}
        label = name if name.isidentifier() and not keyword.iskeyword(name) else repr(name)
        text = f"{label}: {annotation(schema)}"
        shown.append(text if name in required else f"{text} = ...")
    return f"{python}(" + ("*, " + ", ".join(shown) if shown else "") + ")"


def summary(description: str) -> str:
    first = description.strip().split("\n", 1)[0]
    cut = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    return cut if len(cut) <= SUMMARY_CHARS else cut[: SUMMARY_CHARS - 1] + "…"


def _doc(tool_signature: str, description: str, parameters: Mapping[str, Any]) -> str:
    lines = [tool_signature, "", description.strip()]
    properties = parameters.get("properties")
    for name, schema in (properties if isinstance(properties, Mapping) else {}).items():
        about = schema.get("description", "") if isinstance(schema, Mapping) else ""
        lines.append(f"  {name}: {about}".rstrip())
    return "\n".join(lines)


def entries(tools: Iterable[Tool]) -> list[Entry]:
    taken: set[str] = set()
    out = []
    for tool in tools:
        function = tool.definition()["function"]
        parameters = function.get("parameters") or {}
        python = python_name(tool.name, taken)
        sig = signature(python, parameters)
        description = function.get("description") or ""
        out.append(Entry(python, tool, sig, summary(description), _doc(sig, description, parameters)))
    return out


def for_program(catalogue: Iterable[Entry]) -> dict[str, dict[str, str]]:
    """The first line the program reads: python name -> exposed name and help text."""
    return {e.python_name: {"name": e.tool.name, "doc": e.doc} for e in catalogue}
