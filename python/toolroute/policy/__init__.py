"""An operator's policy over who may see and call which tool with which arguments, and how a
tool is shown (docs/usage.md, "Policy").

    policy = Policy.load("policy.yaml")
    router = ToolRouter(policy=policy)

Rules are CEL (the `common-expression-language` binding of the Rust `cel` crate), compiled once
per policy. A tool's view per caller is made once per exposure (`police`): tools a rule denies
without looking at `args` are left out; the others are wrapped (`PolicedTool`) so each call is
checked against the rules its arguments decide, and shown with the operator's overrides.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolroute.policy.file import PolicyFileError, PolicySpec, ToolOverride, parse_policy, read_policy
from toolroute.policy.rules import Rule, Verdict, View, compile_rules, view_of
from toolroute.policy.tools import APPROVED, DECISIONS, PolicedTool
from toolroute.types import Tool

__all__ = [
    "APPROVED",
    "DECISIONS",
    "PolicedTool",
    "Policy",
    "PolicyFileError",
    "Subject",
    "Verdict",
    "current_subject",
    "policy_subject",
]


@dataclass(frozen=True)
class Subject:
    """Who calls, as the rules see it: `user.id`, `user.claims`, `request.transport`."""

    user_id: str | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)
    transport: str = "library"
    key: Any = field(init=False, repr=False, compare=False)  # hashable: views are cached by it

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.user_id, _frozen(self.claims), self.transport))


_SUBJECT: contextvars.ContextVar[Subject | None] = contextvars.ContextVar("toolroute_policy_subject", default=None)


def current_subject(user_id: str | None) -> Subject:
    """The subject a front end set for this request, else a library caller known by its id."""
    subject = _SUBJECT.get()
    if subject is not None and (user_id is None or subject.user_id == user_id):
        return subject
    known = _LIBRARY_SUBJECTS.get(user_id)
    if known is None:
        if len(_LIBRARY_SUBJECTS) > 4096:
            _LIBRARY_SUBJECTS.clear()
        known = _LIBRARY_SUBJECTS[user_id] = Subject(user_id)
    return known


_LIBRARY_SUBJECTS: dict[str | None, Subject] = {}  # made once per user id: `invoke` asks per call


@contextlib.contextmanager
def policy_subject(subject: Subject) -> Iterator[Subject]:
    """Expose and call as `subject` (its claims reach `user.claims`) within the block."""
    token = _SUBJECT.set(subject)
    try:
        yield subject
    finally:
        _SUBJECT.reset(token)


def _annotations(tool: Tool) -> dict[str, Any]:
    """The tool's MCP annotations, camelCase (an upstream's as declared; toolroute's own from
    its traits)."""
    wire = getattr(tool, "wire", None)
    declared = wire.get("annotations") if isinstance(wire, Mapping) else None
    if isinstance(declared, Mapping):
        return {k: v for k, v in declared.items() if v is not None}
    traits = tool.traits
    out: dict[str, Any] = {"readOnlyHint": traits.read_only, "idempotentHint": traits.idempotent}
    if traits.destructive is not None:
        out["destructiveHint"] = traits.destructive
    return out


class Policy:
    """A checked, compiled policy. Thread-safe; views are cached per tool and subject."""

    def __init__(self, spec: PolicySpec, rules: list[Rule], source: str = "<policy>") -> None:
        self.spec = spec
        self.source = source
        self.rules = rules
        self.default = Verdict(spec.default, None, "refused by policy")
        self.overrides: dict[str, ToolOverride] = dict(spec.tools)
        # Renamed tools are called by their new names; the old ones are gone.
        self.renamed: dict[str, str] = {o.name: old for old, o in spec.tools.items() if o.name and o.name != old}
        self._cache: dict[tuple[int, Any], tuple[Tool, Tool | None]] = {}
        self._hiding: dict[tuple[int, Any], tuple[Tool, Verdict]] = {}  # why each hidden one is
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """The policy in a YAML or JSON file; `PolicyFileError` names line and column of a fault."""
        spec, positions, source = read_policy(path)
        return cls(spec, compile_rules(spec.rules, positions, source), source)

    @classmethod
    def from_text(cls, text: str, source: str = "<policy>") -> Policy:
        spec, positions = parse_policy(text, source)
        return cls(spec, compile_rules(spec.rules, positions, source), source)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        spec = PolicySpec.model_validate(data)
        return cls(spec, compile_rules(spec.rules, {}, "<policy>"))

    def _context(self, tool: Tool, subject: Subject) -> dict[str, Any]:
        server = getattr(tool, "service_id", None)
        return {
            "tool": {"name": tool.name, "server": server or "", "annotations": _annotations(tool)},
            "user": {"id": subject.user_id or "", "claims": dict(subject.claims)},
            "request": {"transport": subject.transport},
        }

    def view(self, tool: Tool, subject: Subject) -> View:
        view = view_of(self.rules, self.default, self._context(tool, subject))
        if view.verdict.rule is None and view.verdict.effect == "deny":
            view = View(
                Verdict("deny", None, f"refused by policy (no rule allows {tool.name})"), view.pending, view.context
            )
        return view

    def police(self, tool: Tool, subject: Subject) -> Tool | None:
        """`tool` as `subject` sees it: None when a rule (or the default) hides it, else the
        wrapper that checks each call and shows the overrides."""
        key = (id(tool), subject.key)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is tool:
            return hit[1]
        view = self.view(tool, subject)
        policed: Tool | None = PolicedTool(tool, view, self.overrides.get(tool.name)) if view.visible else None
        with self._lock:
            if len(self._cache) > 8192:  # subjects come and go: a bound, not an eviction policy
                self._cache.clear()
                self._hiding.clear()
            self._cache[key] = (tool, policed)
            if policed is None:
                self._hiding[key] = (tool, view.verdict)
        return policed

    def hiding(self, tool: Tool, subject: Subject) -> Verdict:
        """The verdict that hides `tool` from `subject` (`police` gave None): for the audit."""
        hit = self._hiding.get((id(tool), subject.key))
        return hit[1] if hit is not None and hit[0] is tool else self.view(tool, subject).verdict

    def original_name(self, name: str) -> str | None:
        """The exposed name a called name stands for (a renamed tool's old one); None for an old
        name that a rename replaced."""
        if name in self.renamed:
            return self.renamed[name]
        override = self.overrides.get(name)
        if override is not None and override.name and override.name != name:
            return None
        return name


def _frozen(value: Any) -> Any:
    """A hashable form of JSON-like claims (the cache key)."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value
