"""JSON schemas for tool parameters: self-contained (no dangling `$ref`) and valid for OpenAI."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from toolroute.errors import ToolRegistrationError

JsonSchema = dict[str, Any]

_DEF_KEYS = ("$defs", "definitions")


def _ref_target(ref: str) -> tuple[str, str] | None:
    for key in _DEF_KEYS:
        prefix = f"#/{key}/"
        if ref.startswith(prefix):
            return key, ref[len(prefix) :]
    return None


def inline_refs(schema: JsonSchema) -> JsonSchema:
    """Replace local `$ref`s by the definitions they name.

    A recursive definition cannot be inlined; it is kept under `$defs` (still self-contained).
    A `$ref` that names nothing in the document is an error, never passed on to a provider.
    """
    root = copy.deepcopy(schema)
    defs: dict[str, Any] = {}
    for key in _DEF_KEYS:
        defs.update({f"{key}/{k}": v for k, v in root.pop(key, {}).items()})
    kept: dict[str, Any] = {}

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target = _ref_target(ref)
            if target is None or f"{target[0]}/{target[1]}" not in defs:
                raise ToolRegistrationError(f"schema has a $ref that names nothing: {ref!r}")
            key = f"{target[0]}/{target[1]}"
            siblings = {k: walk(v, stack) for k, v in node.items() if k != "$ref"}
            if key in stack:  # recursion: keep a reference into $defs
                kept[target[1]] = key
                return {"$ref": f"#/$defs/{target[1]}", **siblings}
            resolved = walk(defs[key], (*stack, key))
            return {**resolved, **siblings} if isinstance(resolved, dict) else resolved
        return {k: walk(v, stack) for k, v in node.items()}

    out = walk(root, ())
    if kept:
        out["$defs"] = {name: walk(defs[key], (key,)) for name, key in kept.items()}
    return out


def as_parameters(schema: JsonSchema | None) -> JsonSchema:
    """Normalise an arbitrary input schema into OpenAI's `parameters` shape: an object."""
    out = inline_refs(schema or {})
    out.pop("title", None)
    out.pop("$schema", None)
    if out.get("type") is None:  # MCP servers often omit it beside "properties"
        out = {"type": "object", **out}
    if out.get("type") != "object":
        raise ToolRegistrationError(f"tool parameters must be a JSON object schema, got type {out.get('type')!r}")
    out.setdefault("properties", {})
    return out


def model_parameters(model: type[BaseModel]) -> JsonSchema:
    """A pydantic model's JSON schema as tool parameters, field order and nesting kept."""
    # By alias: what pydantic validates by default, so the name the model sees is the one accepted.
    return as_parameters(model.model_json_schema(by_alias=True))


def function_definition(name: str, description: str, parameters: JsonSchema) -> dict[str, Any]:
    """The OpenAI Chat Completions tool definition, the router's canonical format."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
