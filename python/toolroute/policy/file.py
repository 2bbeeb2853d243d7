"""A policy file: YAML or JSON, checked by pydantic, every fault named by line and column.

An operator edits this file by hand and reloads it while the gateway runs; a fault must say
where it is (the node's line and column), not only what it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pydantic

Effect = Literal["allow", "deny", "approve"]


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message names the file, line and column."""


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class RuleSpec(_Strict):
    id: str = pydantic.Field(min_length=1)
    when: str = pydantic.Field(min_length=1)  # a CEL expression
    effect: Effect
    reason: str = ""


class ToolOverride(_Strict):
    name: str | None = pydantic.Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = None
    fixed: dict[str, Any] = pydantic.Field(default_factory=dict)  # always sent with this value
    hidden: list[str] = pydantic.Field(default_factory=list)  # a sent value never reaches the tool

    @pydantic.model_validator(mode="after")
    def _apart(self) -> ToolOverride:
        both = set(self.fixed) & set(self.hidden)
        if both:
            raise ValueError(f"arguments both fixed and hidden: {', '.join(sorted(both))}")
        return self


class PolicySpec(_Strict):
    default: Literal["allow", "deny"] = "allow"
    rules: list[RuleSpec] = pydantic.Field(default_factory=list)
    tools: dict[str, ToolOverride] = pydantic.Field(default_factory=dict)

    @pydantic.model_validator(mode="after")
    def _unique(self) -> PolicySpec:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.id in seen:
                raise ValueError(f"two rules have the id {rule.id!r}")
            seen.add(rule.id)
        names = [o.name or exposed for exposed, o in self.tools.items()]
        clash = {n for n in names if names.count(n) > 1}
        if clash:
            raise ValueError(f"two tools would be listed as {', '.join(sorted(clash))}")
        return self


Location = tuple[int, int]  # line, column (1-based)


def _marks(node: Any, path: tuple[Any, ...], out: dict[tuple[Any, ...], Location]) -> None:
    """Each node's position by its path from the root (keys, list indexes)."""
    import yaml

    out[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _marks(value, (*path, key.value), out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _marks(item, (*path, index), out)


def _positions(text: str) -> dict[tuple[Any, ...], Location]:
    """Where each value of the document starts (JSON is read as the YAML it also is)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    out: dict[tuple[Any, ...], Location] = {}
    if root is not None:
        _marks(root, (), out)
    return out


def _nearest(positions: Mapping[tuple[Any, ...], Location], path: Sequence[Any]) -> Location:
    """The position of `path`, or of its closest ancestor that has one."""
    key = tuple(path)
    while key:
        if key in positions:
            return positions[key]
        key = key[:-1]
    return positions.get((), (1, 1))


def _parse(text: str, source: str) -> Any:
    if source.endswith(".json") or text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyFileError(f"{source}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    try:
        import yaml  # the policy extra
    except ImportError:
        raise PolicyFileError(f"{source}: a YAML policy needs PyYAML: pip install 'toolroute[policy]'") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyFileError(f"{source}:{where}: not valid YAML: {problem}") from None


def parse_policy(text: str, source: str = "<policy>") -> tuple[PolicySpec, dict[tuple[Any, ...], Location]]:
    """The checked policy in `text` and where each of its values stands (for later faults, such
    as a rule's CEL that does not compile)."""
    data = _parse(text, source)
    positions = _positions(text)
    if data is None:
        data = {}
    try:
        return PolicySpec.model_validate(data), positions
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        line, column = _nearest(positions, first["loc"])
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise PolicyFileError(f"{source}:{line}:{column}: {field}: {first['msg']}{more}") from None


def read_policy(path: str | Path) -> tuple[PolicySpec, dict[tuple[Any, ...], Location], str]:
    """`parse_policy` of a file; the third value is the source name used in messages."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"{source}: cannot read the policy: {exc}") from None
    spec, positions = parse_policy(text, source)
    return spec, positions, source
