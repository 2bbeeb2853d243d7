"""Rules in CEL, compiled once per policy, and what they leave to decide per call.

Whatever a rule says without the call's `args` is known when a caller's tools are listed: such a
rule decides which tools that caller sees. CEL's `&&` and `||` ignore an error on one side when the
other decides (`tool.name == "read" && args.path...` is false for `bash` with no `args` at all), so
evaluating every rule once without `args` sorts them per tool: decided (true or false), or left to
the call (it needs `args`). A call then evaluates only the rules left to it, usually none.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolroute.policy.file import Effect, Location, PolicyFileError, RuleSpec


@dataclass(frozen=True)
class Verdict:
    """What decided: a rule (its id) or the default (rule None)."""

    effect: Effect
    rule: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class Rule:
    spec: RuleSpec
    program: Any  # cel.Program
    needs_args: bool  # the expression names `args`
    variables: frozenset[str]
    verdict: Verdict
    # The top-level argument names the expression reads (`args.path`), None when it may read any
    # (`args["p"]`, `size(args)`, a macro over `args`): a call converts only these for CEL, never a
    # write's whole content for a rule about its path.
    arg_keys: frozenset[str] | None = None

    def matches(self, context: Any) -> bool | None:
        """True or False; None when the expression errs (a missing key, `args` not known yet, a
        value that is not a bool). `context`: a dict, or a `cel.Context`."""
        try:
            value = self.program.execute(context)
        except Exception:  # the binding raises KeyError, RuntimeError, TypeError, ValueError...
            return None
        return value if isinstance(value, bool) else None

    def fails_closed(self) -> bool:
        """An expression that errs on a call counts as matching for a deny or approve rule (a
        typo must not open the door) and as not matching for an allow rule."""
        return self.verdict.effect != "allow"


def compile_rules(rules: Sequence[RuleSpec], positions: Mapping[tuple[Any, ...], Location], source: str) -> list[Rule]:
    try:
        import cel  # the policy extra: `pip install toolroute[policy]`
    except ImportError:
        raise PolicyFileError(
            f"{source}: policies need the CEL binding: pip install 'toolroute[policy]' (common-expression-language)"
        ) from None
    out: list[Rule] = []
    for index, spec in enumerate(rules):
        try:
            program = cel.compile(spec.when)
        except Exception as exc:
            line, column = positions.get(("rules", index, "when"), positions.get(("rules", index), (1, 1)))
            detail = str(exc).splitlines()
            raise PolicyFileError(
                f"{source}:{line}:{column}: rule {spec.id!r}: its `when` is not valid CEL: "
                + " ".join(d.strip() for d in detail if d.strip())[:400]
            ) from None
        variables = frozenset(program.variables())
        # The names a macro binds (`args.exists(k, ...)`) are variables to the binding too.
        unknown = variables - {"tool", "args", "user", "request"} - set(_BOUND.findall(spec.when))
        if unknown:
            line, column = positions.get(("rules", index, "when"), (1, 1))
            raise PolicyFileError(
                f"{source}:{line}:{column}: rule {spec.id!r}: unknown variable {', '.join(sorted(unknown))} "
                "(there are tool, args, user and request)"
            )
        reason = spec.reason or _default_reason(spec)
        verdict = Verdict(spec.effect, spec.id, reason)
        out.append(Rule(spec, program, "args" in variables, variables, verdict, _arg_keys(spec.when)))
    return out


_ARGS = re.compile(r"\bargs\b")
_BOUND = re.compile(r"\b(?:all|exists|exists_one|map|filter|bind)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
_FIELD = re.compile(r"\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")


def _arg_keys(expression: str) -> frozenset[str] | None:
    """The names every use of `args` in `expression` selects (`args.NAME`, not followed by a
    call), or None when one use is anything else. Text inside string literals counts too: that
    only widens the set, never narrows it."""
    keys: set[str] = set()
    for use in _ARGS.finditer(expression):
        field = _FIELD.match(expression, use.end())
        if field is None:
            return None
        keys.add(field.group(1))
    return frozenset(keys)


def _default_reason(spec: RuleSpec) -> str:
    if spec.effect == "approve":
        return f"this call needs a person's approval (policy rule {spec.id})"
    return f"refused by policy rule {spec.id}"


@dataclass(frozen=True)
class View:
    """One tool as one caller sees it: the verdict when nothing is left to the call, else the
    rules the call's `args` decide (in order) and the verdict after them."""

    verdict: Verdict
    pending: tuple[Rule, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)  # tool, user, request
    # Per thread, a `cel.Context` holding what the pending rules read besides `args`, converted
    # to CEL once (a Context is not thread-safe; converting the variables is most of a call's cost).
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    @property
    def visible(self) -> bool:
        return bool(self.pending) or self.verdict.effect != "deny"

    @functools.cached_property
    def _arg_keys(self) -> frozenset[str] | None:
        keys: set[str] = set()
        for rule in self.pending:
            if rule.arg_keys is None:
                return None
            keys |= rule.arg_keys
        return frozenset(keys)

    def _cel_context(self) -> Any:
        held = getattr(self._local, "context", None)
        if held is None:
            import cel

            wanted = set().union(*(rule.variables for rule in self.pending)) - {"args"}
            held = self._local.context = cel.Context({k: v for k, v in self.context.items() if k in wanted})
        return held

    def decide(self, args: Mapping[str, Any]) -> Verdict:
        if not self.pending:
            return self.verdict
        context = self._cel_context()
        keys = self._arg_keys
        if keys is not None:
            args = {k: args[k] for k in keys if k in args}
        try:
            context.add_variable("args", args if type(args) is dict else dict(args))
        except Exception:  # a value CEL cannot hold: every pending rule errs, and so fails closed
            return next((rule.verdict for rule in self.pending if rule.fails_closed()), self.verdict)
        for rule in self.pending:
            hit = rule.matches(context)
            if hit or (hit is None and rule.fails_closed()):
                return rule.verdict
        return self.verdict


def view_of(rules: Sequence[Rule], default: Verdict, context: Mapping[str, Any]) -> View:
    """Evaluate every rule without `args`: the first one true decides, unless a rule before it
    needs the call's `args`, which leaves the rest to the call."""
    pending: list[Rule] = []
    for rule in rules:
        hit = rule.matches(context)
        if hit is None:
            if rule.needs_args:
                pending.append(rule)  # it reads `args`: the call decides
                continue
            hit = rule.fails_closed()  # it errs whatever the call: as on a call
        if hit:
            return View(rule.verdict, tuple(pending), context)
    return View(default, tuple(pending), context)
