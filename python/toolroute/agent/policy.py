"""Approval: a policy consulted before each call says allow, deny (with a reason the model sees)
or ask (the host's approver decides). `safe_policy()` is the ready-made default."""

from __future__ import annotations

import fnmatch
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypeVar

from toolroute.agent.types import DENIED, INVALID_CALL, REJECTED, AgentToolCall, AgentToolResult

T = TypeVar("T")


class Verdict(str, Enum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> Decision:
        return cls(Verdict.ALLOW, reason)

    @classmethod
    def deny(cls, reason: str) -> Decision:
        return cls(Verdict.DENY, reason)

    @classmethod
    def ask(cls, reason: str = "") -> Decision:
        return cls(Verdict.ASK, reason)


class ApprovalPolicy(Protocol):
    """Consulted before each call; may be sync or return an awaitable."""

    def decide(self, call: AgentToolCall) -> Decision | Awaitable[Decision]: ...


@dataclass(frozen=True)
class ApprovalRequest:
    """What the host's approver is asked about: the call and why the policy wants a human."""

    call: AgentToolCall
    reason: str


# An approver answers True/False, or a Decision (allow, or deny with a reason the model sees).
ApprovalAnswer = bool | Decision
Approver = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer] | ApprovalAnswer]

ArgumentCondition = str | Callable[[Any], bool]


def _argument_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _compile(condition: ArgumentCondition) -> Callable[[Any], bool]:
    if callable(condition):
        return condition
    pattern = re.compile(condition)
    return lambda value: pattern.search(_argument_text(value)) is not None


@dataclass(frozen=True)
class Rule:
    """Matches calls by tool name pattern(s) (shell-style, e.g. "bash", "mcp_*") and, optionally, by
    argument conditions: a regex searched in the argument's text, or a predicate on its value.
    Every condition must hold; a named argument that is absent fails its condition.

    When the arguments are not a JSON object, conditions cannot be checked: deny/ask rules then
    match (fail closed) and allow rules do not.
    """

    tools: str | tuple[str, ...]
    verdict: Verdict
    reason: str = ""
    arguments: Mapping[str, ArgumentCondition] = field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] | None = None
    _checks: tuple[tuple[str, Callable[[Any], bool]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if isinstance(self.tools, str):
            object.__setattr__(self, "tools", (self.tools,))
        object.__setattr__(self, "_checks", tuple((k, _compile(c)) for k, c in self.arguments.items()))

    def matches(self, call: AgentToolCall) -> bool:
        if not any(fnmatch.fnmatchcase(call.name, p) for p in self.tools):
            return False
        if not self._checks and self.when is None:
            return True
        args = call.parsed_arguments()
        if args is None:
            return self.verdict is not Verdict.ALLOW
        if any(name not in args or not check(args[name]) for name, check in self._checks):
            return False
        return self.when is None or bool(self.when(args))

    def decision(self) -> Decision:
        return Decision(self.verdict, self.reason)


class RulePolicy:
    """The first matching rule decides; otherwise `default`."""

    def __init__(self, rules: Iterable[Rule], default: Decision | None = None) -> None:
        self.rules = tuple(rules)
        self.default = default or Decision.allow()

    def decide(self, call: AgentToolCall) -> Decision:
        for rule in self.rules:
            if rule.matches(call):
                return rule.decision()
        return self.default

    def extended(self, *rules: Rule) -> RulePolicy:
        """A policy whose new `rules` are tried before these."""
        return RulePolicy((*rules, *self.rules), self.default)


SAFE_REASON = (
    "tool {tools} changes files or runs commands and requires approval under the default safe policy; "
    "pass policy=allow_all() to opt out"
)
SIDE_EFFECTING_BUILTINS = ("write_file", "apply_patch", "edit", "bash")


def safe_policy() -> RulePolicy:
    """AI4J's default SAFE policy: approval for write_file, apply_patch, edit and bash. Also for
    update_agents_md writes, since AGENTS.md becomes future instructions to the agent."""
    return RulePolicy(
        [
            Rule(SIDE_EFFECTING_BUILTINS, Verdict.ASK, SAFE_REASON.format(tools="/".join(SIDE_EFFECTING_BUILTINS))),
            Rule(
                "update_agents_md",
                Verdict.ASK,
                SAFE_REASON.format(tools="update_agents_md"),
                arguments={"action": r"^(write|append)$"},
            ),
        ]
    )


def allow_all() -> RulePolicy:
    return RulePolicy([], Decision.allow())


def deny_all(reason: str = "tool calls are disabled for this agent") -> RulePolicy:
    return RulePolicy([], Decision.deny(reason))


def allow_tools(names: Iterable[str], reason: str = "tool is not in the allow list") -> RulePolicy:
    """Only these tools (name patterns) run; everything else is denied."""
    return RulePolicy([Rule(tuple(names), Verdict.ALLOW)], Decision.deny(reason))


async def _resolve(value: T | Awaitable[T]) -> T:
    """A sync hook's value, or an async hook's awaited value."""
    if inspect.isawaitable(value):
        return await value
    return value


async def check_approval(
    call: AgentToolCall, policy: ApprovalPolicy, approver: Approver | None
) -> AgentToolResult | None:
    """None when the call may run, else the refusal the model reads. Fails closed: a policy or
    approver that raises, or an "ask" with no approver, refuses the call."""
    if not call.name.strip():
        return AgentToolResult.failure(call, INVALID_CALL, "tool name is required")
    try:
        decision: Decision = await _resolve(policy.decide(call))
    except Exception as exc:
        return AgentToolResult.failure(call, DENIED, f"the approval policy failed ({type(exc).__name__}: {exc})")
    if decision.verdict is Verdict.ALLOW:
        return None
    if decision.verdict is Verdict.DENY:
        return AgentToolResult.failure(call, DENIED, f"tool call denied by policy: {decision.reason or 'no reason'}")
    if approver is None:
        return AgentToolResult.failure(
            call, DENIED, f"this call needs approval and the host has no approver: {decision.reason}"
        )
    try:
        answer: ApprovalAnswer = await _resolve(approver(ApprovalRequest(call, decision.reason)))
    except Exception as exc:
        return AgentToolResult.failure(call, REJECTED, f"approval could not be obtained ({type(exc).__name__}: {exc})")
    if answer is True or (isinstance(answer, Decision) and answer.verdict is Verdict.ALLOW):
        return None
    reason = answer.reason if isinstance(answer, Decision) and answer.reason else "no reason given"
    return AgentToolResult.failure(call, REJECTED, f"the user did not approve this call: {reason}")
