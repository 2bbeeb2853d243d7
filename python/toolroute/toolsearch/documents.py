"""A tool definition as the search index reads it: name, namespace, description, parameters.

Parameters are flattened (nested objects and array items, to a few levels), each with its
description and enum values as its text, so `unit: one of celsius, fahrenheit` is findable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NESTING = 3  # levels of nested parameters read
Document = tuple[str, str, str, list[tuple[str, str]]]


def parameters_of(schema: Any, depth: int = 0) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(schema, Mapping) or depth > NESTING:
        return out
    properties = schema.get("properties")
    for name, spec in (properties if isinstance(properties, Mapping) else {}).items():
        if not isinstance(spec, Mapping):
            out.append((str(name), ""))
            continue
        text = str(spec.get("description") or "")
        if isinstance(spec.get("enum"), list):
            text += " " + " ".join(str(v) for v in spec["enum"])
        out.append((str(name), text.strip()))
        out += parameters_of(spec, depth + 1)
        out += parameters_of(spec.get("items"), depth + 1)
    return out


def document(function: Mapping[str, Any], namespace: str = "") -> Document:
    """`function`: a definition's `function` part (`{name, description, parameters}`)."""
    return (
        str(function.get("name") or ""),
        namespace,
        str(function.get("description") or ""),
        parameters_of(function.get("parameters")),
    )
