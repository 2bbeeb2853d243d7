"""A tool as an operator's policy shows it: renamed, re-described, with fixed and hidden
arguments gone from its schema, and every call checked against the rules its `args` decide.

The wrapper is the narrowest hook: an exposure holds it in place of the tool, so every door that
runs an exposure's tools (the adapters, served mode, code mode's programs) runs the check.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolroute.errors import ApprovalRequiredError, PolicyDeniedError
from toolroute.types import UNBOUND, Tool, ToolDefinition, ToolHost, ToolTraits

if TYPE_CHECKING:  # the CEL side is the policy extra's; this wrapper needs none of it
    from toolroute.policy.file import ToolOverride
    from toolroute.policy.rules import Verdict, View

# Set by a door that ran a person's approval: a held call then runs.
APPROVED: contextvars.ContextVar[bool] = contextvars.ContextVar("toolroute_policy_approved", default=False)
# A door that reports decisions (served mode's audit line) puts a list here; each policed call
# appends its verdict (a list, so a worker thread's copy of the context appends to the same one).
DECISIONS: contextvars.ContextVar[list[Verdict] | None] = contextvars.ContextVar(
    "toolroute_policy_decisions", default=None
)


def _trimmed_schema(schema: Mapping[str, Any], gone: set[str]) -> dict[str, Any]:
    """`schema` without the properties in `gone` (nor in `required`)."""
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {k: v for k, v in props.items() if k not in gone}
    required = out.get("required")
    if isinstance(required, list):
        out["required"] = [r for r in required if r not in gone]
    return out


class PolicedTool:
    """`inner` seen through a policy: its view for one caller and the operator's overrides."""

    def __init__(self, inner: Tool, view: View, override: ToolOverride | None) -> None:
        self.inner = inner
        self.view = view
        self.override = override
        self._name = override.name if override is not None and override.name else inner.name
        self._fixed: dict[str, Any] = dict(override.fixed) if override is not None else {}
        self._gone = {*self._fixed, *(override.hidden if override is not None else ())}
        # What the upstream's listing says, edited the same way (served mode lists `wire`).
        wire = getattr(inner, "wire", None)
        self.wire: dict[str, Any] | None = self._edited_wire(wire) if isinstance(wire, Mapping) else None
        self.service_id = getattr(inner, "service_id", None)
        self.title = getattr(inner, "title", None)
        self.output_schema = getattr(inner, "output_schema", None)

    def _edited_wire(self, wire: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(wire)
        out["name"] = self._name
        if self.override is not None and self.override.description is not None:
            out["description"] = self.override.description
        schema = out.get("inputSchema")
        if self._gone and isinstance(schema, Mapping):
            out["inputSchema"] = _trimmed_schema(schema, self._gone)
        return out

    @property
    def kind(self) -> Any:
        return self.inner.kind

    @property
    def name(self) -> str:
        return self._name

    @property
    def traits(self) -> ToolTraits:
        return self.inner.traits

    def definition(self) -> ToolDefinition:
        definition = copy.deepcopy(self.inner.definition())
        fn = definition["function"]
        fn["name"] = self._name
        if self.override is not None and self.override.description is not None:
            fn["description"] = self.override.description
        if self._gone:
            fn["parameters"] = _trimmed_schema(fn["parameters"], self._gone)
        return definition

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments the tool gets, once the policy lets the call run: hidden ones dropped,
        fixed ones set (over the caller's). Raises the refusal otherwise; nothing runs."""
        verdict = self.view.decide(arguments)
        noted = DECISIONS.get()
        if noted is not None:
            noted.append(verdict)
        if verdict.effect == "deny":
            raise PolicyDeniedError(verdict.reason, tool=self._name, rule=verdict.rule)
        if verdict.effect == "approve" and not APPROVED.get():
            raise ApprovalRequiredError(verdict.reason, tool=self._name, rule=verdict.rule)
        if not self._gone:
            return dict(arguments)
        args = {k: v for k, v in arguments.items() if k not in self._gone}
        args.update(self._fixed)
        return args

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        """Whether the policy holds this call for a person (a door asks before running it)."""
        verdict = self.view.decide(arguments)
        if verdict.effect != "approve":
            return False
        noted = DECISIONS.get()
        if noted is not None:
            noted.append(verdict)
        return True

    def call(self, arguments: Mapping[str, Any], host: ToolHost) -> Any:
        return self.inner.call(self.check(arguments), host)

    def call_text(self, text: str, host: ToolHost) -> Any:
        """The inner tool's one-pass path from JSON text, kept when no rule reads the call's
        arguments and none are fixed or hidden (the arguments then pass as they are)."""
        inner = getattr(self.inner, "call_text", None)
        if inner is None or self.view.pending or self._gone:
            return UNBOUND
        self.check({})
        return inner(text, host)

    async def acall(self, arguments: Mapping[str, Any], host: ToolHost) -> Any:
        return await self.inner.acall(self.check(arguments), host)

    def blocking(self) -> bool:
        return self.inner.blocking()
