"""JSON schemas for tool parameters: self-contained (no dangling `$ref`) and valid for OpenAI."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolroute.errors import ToolRegistrationError

JsonSchema = dict[str, Any]

_DEF_KEYS = ("$defs", "definitions")

# A tool's parameters are sent with every model request; these bound what one schema may cost,
# however it is built. 10,000 JSON values is some 200-400 KB of JSON, far beyond any useful tool.
MAX_SCHEMA_NODES = 10_000
MAX_SCHEMA_DEPTH = 64


class SchemaBudgetError(ToolRegistrationError):
    """A schema larger or deeper than the budget, even with its `$defs` kept unexpanded."""


class _OverBudget(Exception):
    """Inlining would pass the budget (internal: the caller keeps the references instead)."""


def _ref_target(ref: str) -> tuple[str, str] | None:
    for key in _DEF_KEYS:
        prefix = f"#/{key}/"
        if ref.startswith(prefix):
            return key, ref[len(prefix) :]
    return None


def check_size(schema: JsonSchema, max_nodes: int = MAX_SCHEMA_NODES, max_depth: int = MAX_SCHEMA_DEPTH) -> None:
    """Count the JSON values of `schema` as written (no `$ref` followed), without recursion, and
    stop at the first value past the budget: a hostile document costs at most the budget."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise SchemaBudgetError(f"input schema has more than {max_nodes} JSON values")
        if depth > max_depth:
            raise SchemaBudgetError(f"input schema is nested deeper than {max_depth} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


class _Inliner:
    """Resolves local `$ref`s against the document's definitions, counting what it emits."""

    def __init__(self, schema: JsonSchema, max_nodes: int, max_depth: int) -> None:
        self.root = {k: v for k, v in schema.items() if k not in _DEF_KEYS}
        self.defs: dict[str, Any] = {}
        for key in _DEF_KEYS:
            section = schema.get(key) or {}
            if not isinstance(section, dict):
                raise ToolRegistrationError(f"schema {key!r} must be an object")
            self.defs.update({f"{key}/{name}": value for name, value in section.items()})
        self.names = self._compact_names()
        self.max_nodes, self.max_depth = max_nodes, max_depth
        self.emitted = 0

    def _compact_names(self) -> dict[str, str]:
        """`$defs` names for every definition; `definitions/x` keeps `x` unless `$defs/x` exists."""
        names: dict[str, str] = {}
        taken = {k.split("/", 1)[1] for k in self.defs if k.startswith("$defs/")}
        for key in self.defs:
            section, name = key.split("/", 1)
            names[key] = name if section == "$defs" or name not in taken else f"definitions.{name}"
        return names

    def key_of(self, ref: str) -> str:
        target = _ref_target(ref)
        key = f"{target[0]}/{target[1]}" if target else None
        if key is None or key not in self.defs:
            raise ToolRegistrationError(f"schema has a $ref that names nothing: {ref!r}")
        return key

    def _count(self, depth: int) -> None:
        self.emitted += 1
        if self.emitted > self.max_nodes or depth > self.max_depth:
            raise _OverBudget

    def inline(self) -> JsonSchema:
        """Every `$ref` replaced by its definition; a recursive one kept under `$defs`. Raises
        `_OverBudget` as soon as the output passes the budget, so the work is bounded too."""
        kept: dict[str, str] = {}

        def walk(node: Any, stack: tuple[str, ...], depth: int) -> Any:
            self._count(depth)
            if isinstance(node, list):
                return [walk(item, stack, depth + 1) for item in node]
            if not isinstance(node, dict):
                return node
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                key = self.key_of(ref)
                siblings = {k: walk(v, stack, depth + 1) for k, v in node.items() if k != "$ref"}
                if key in stack:  # recursion: keep a reference into $defs
                    kept[self.names[key]] = key
                    return {"$ref": f"#/$defs/{self.names[key]}", **siblings}
                resolved = walk(self.defs[key], (*stack, key), depth)
                return {**resolved, **siblings} if isinstance(resolved, dict) else resolved
            return {k: walk(v, stack, depth + 1) for k, v in node.items()}

        out: JsonSchema = walk(self.root, (), 1)
        done: set[str] = set()
        while kept.keys() - done:  # a kept definition may keep others
            name = next(iter(kept.keys() - done))
            done.add(name)
            out.setdefault("$defs", {})[name] = walk(self.defs[kept[name]], (kept[name],), 2)
        return out

    def compact(self) -> JsonSchema:
        """The document with its references kept: one `$defs` section holding the definitions
        reachable from the root, every local `$ref` pointing into it. Linear in the input."""
        reachable: dict[str, str] = {}

        def walk(node: Any) -> Any:
            if isinstance(node, list):
                return [walk(item) for item in node]
            if not isinstance(node, dict):
                return node
            out = {k: walk(v) for k, v in node.items()}
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                key = self.key_of(ref)
                reachable.setdefault(self.names[key], key)
                out["$ref"] = f"#/$defs/{self.names[key]}"
            return out

        out: JsonSchema = walk(self.root)
        defs: dict[str, Any] = {}
        while reachable.keys() - defs.keys():
            name = next(iter(reachable.keys() - defs.keys()))
            defs[name] = walk(self.defs[reachable[name]])
        if defs:
            out["$defs"] = defs
        return out


def inline_refs(
    schema: JsonSchema, *, max_nodes: int = MAX_SCHEMA_NODES, max_depth: int = MAX_SCHEMA_DEPTH
) -> JsonSchema:
    """Replace local `$ref`s by the definitions they name, within a budget.

    Inlined output is what every provider accepts, but a definition used twice is copied twice,
    so a few KB of nested `$defs` can expand exponentially. Inlining stops once the output passes
    `max_nodes` JSON values or `max_depth` levels; the schema is then kept compact instead, with
    its references into one `$defs` section (which OpenAI's and Anthropic's tool schemas accept).
    A recursive definition is always kept under `$defs`. A schema whose compact form is itself
    past the budget raises `SchemaBudgetError`; a `$ref` that names nothing in the document
    raises `ToolRegistrationError`. The input is never modified.
    """
    check_size(schema, max_nodes, max_depth)
    inliner = _Inliner(schema, max_nodes, max_depth)
    try:
        return inliner.inline()
    except _OverBudget:
        return inliner.compact()


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
