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
    # The expression with each `args.NAME` read as a variable of its own (`_arg_NAME`), when it
    # can be: a call then hands CEL the values it reads, not a map holding them (measured: the
    # binding's conversion of a map is most of a call's cost).
    flat: Any = None

    def matches(self, context: Any, program: Any = None) -> bool | None:
        """True or False; None when the expression errs (a missing key, `args` not known yet, a
        value that is not a bool). `context`: a dict, or a `cel.Context`; `program`: the rule's
        (default) or its `flat` one."""
        try:
            value = (program or self.program).execute(context)
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
        keys = _arg_keys(spec.when)
        flat = _flat_program(cel, spec.when, variables, keys) if keys else None
        out.append(Rule(spec, program, "args" in variables, variables, verdict, keys, flat))
    return out


FLAT_PREFIX = "_arg_"
# A CEL string or bytes literal (raw or not, single or triple quoted): never rewritten.
_LITERAL = re.compile(
    r'[rRbB]{0,2}(?:"""(?:\\.|[^\\])*?"""'
    r"|'''(?:\\.|[^\\])*?'''"
    r'|"(?:\\.|[^"\\\n])*"'
    r"|'(?:\\.|[^'\\\n])*')",
    re.DOTALL,
)
# `args.NAME` at the top level (not a field of something else, not a method call).
_SELECT = re.compile(r"(?<![.\w])args\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")


def _flat_program(cel: Any, expression: str, variables: frozenset[str], keys: frozenset[str]) -> Any:
    """`expression` compiled with each top-level `args.NAME` (outside string literals) read as the
    variable `_arg_NAME`; None unless the result reads exactly the variables it should."""
    read: set[str] = set()

    def flat(match: re.Match[str]) -> str:
        read.add(FLAT_PREFIX + match.group(1))
        return FLAT_PREFIX + match.group(1)

    out: list[str] = []
    at = 0
    for literal in _LITERAL.finditer(expression):
        out.append(_SELECT.sub(flat, expression[at : literal.start()]))
        out.append(literal.group(0))
        at = literal.end()
    out.append(_SELECT.sub(flat, expression[at:]))
    if not read <= {FLAT_PREFIX + k for k in keys}:
        return None
    try:
        program = cel.compile("".join(out))
    except Exception:
        return None
    return program if frozenset(program.variables()) == (variables - {"args"}) | read else None


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

    @functools.cached_property
    def _flat(self) -> bool:
        """Whether every pending rule reads `args.NAME` only, as variables of their own."""
        return all(rule.flat is not None for rule in self.pending)

    def _cel_context(self) -> tuple[Any, dict[str, Any]]:
        held: tuple[Any, dict[str, Any]] | None = getattr(self._local, "held", None)
        if held is None:
            import cel

            wanted = set().union(*(rule.variables for rule in self.pending)) - {"args"}
            context = cel.Context({k: v for k, v in self.context.items() if k in wanted})
            values: dict[str, Any] = {}
            context.set_variable_resolver(values.get)
            held = self._local.held = (context, values)
        return held

    def decide(self, args: Mapping[str, Any]) -> Verdict:
        if not self.pending:
            return self.verdict
        context, values = self._cel_context()
        keys = self._arg_keys
        flat = self._flat
        if flat and keys is not None:
            for key in keys:
                value = args.get(key)
                if type(value) in _FLAT_TYPES:
                    values[FLAT_PREFIX + key] = value
                elif key in args:  # null (to the resolver: "not mine") or a value of another kind
                    flat = False
                    break
                # absent: the rule errs on it, as on `args.NAME`
        if not flat:
            values.clear()
            whole = {k: args[k] for k in keys if k in args} if keys is not None else args
            values["args"] = whole if type(whole) is dict else dict(whole)
        try:
            for rule in self.pending:
                hit = rule.matches(context, rule.flat if flat else None)
                if hit or (hit is None and rule.fails_closed()):
                    return rule.verdict
            return self.verdict
        finally:
            values.clear()  # a call's values are not held after it


# What goes to CEL as a variable of its own (None cannot: to the resolver it means "not here").
_FLAT_TYPES = frozenset({str, int, float, bool, dict, list})


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
