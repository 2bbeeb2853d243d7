"""A rule that reads `args.NAME` is evaluated with each such argument as a variable of its own
(`_arg_NAME`, policy/rules.py: the binding's conversion of a map is most of a call's cost). The
two ways must decide alike on every call: absent, null, nested, odd values, string literals that
look like `args.x`, fields named `args` of something else, and methods."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from toolroute.policy.file import RuleSpec
from toolroute.policy.rules import Verdict, compile_rules, view_of

CONTEXT = {
    "tool": {"name": "write_file", "server": "", "annotations": {}},
    "user": {"id": "u", "claims": {"roles": ["dev"], "args": {"path": "claims"}}},
    "request": {"transport": "library"},
}
DEFAULT = Verdict("allow", None, "")

EXPRESSIONS = [
    'args.path.startsWith("secrets/")',
    'args.path == "args.path"',  # a literal that looks like a read
    "args.path == 'it\\'s args.x' || args.mode == 2",  # an escaped quote inside a literal
    'args . path . endsWith(".env")',
    "args.size > 10 && args.size < 1000",
    "args.path == null",
    'args.options.force == true && "dev" in user.claims.roles',
    'user.claims.args.path == "claims" && args.path.contains("x")',  # a field named args elsewhere
    "args.tags.exists(t, t == 'prod')",
    'r"args.path" == args.path',
    '"""args.path""" != args.path && args.flag',
]

CALLS: list[dict[str, Any]] = [
    {},
    {"path": "secrets/key"},
    {"path": "open/x.env", "size": 100, "mode": 2},
    {"path": None, "size": None},
    {"path": "args.path"},
    {"path": "it's args.x"},
    {"path": 7, "size": "big"},
    {"options": {"force": True}, "path": "x"},
    {"options": {"force": None}},
    {"tags": ["dev", "prod"], "flag": True, "path": "p"},
    {"tags": "prod", "flag": "yes"},
    {"size": 2**70},
    {"path": b"bytes"},
    {"path": ["list"]},
]


@pytest.mark.parametrize("effect", ["deny", "allow", "approve"])
@pytest.mark.parametrize("when", EXPRESSIONS)
def test_flat_arguments_decide_as_the_map_does(when: str, effect: str) -> None:
    (rule,) = compile_rules([RuleSpec(id="r", when=when, effect=effect)], {}, "<test>")  # type: ignore[arg-type]
    assert rule.flat is not None  # every one of these reads `args.NAME` only
    as_map = dataclasses.replace(rule, flat=None)
    flat_view, map_view = view_of([rule], DEFAULT, CONTEXT), view_of([as_map], DEFAULT, CONTEXT)
    assert flat_view.pending and map_view.pending
    for call in CALLS:
        assert flat_view.decide(call) == map_view.decide(call), (when, call)


def test_reads_of_only_named_arguments_are_flattened_and_others_are_not() -> None:
    specs = [
        RuleSpec(id="flat", when='args.path.startsWith("s")', effect="deny"),
        RuleSpec(id="literal", when='args.path == "args.path"', effect="deny"),
        RuleSpec(id="index", when='args["path"] == "s"', effect="deny"),
        RuleSpec(id="size", when="size(args) > 3", effect="deny"),
        RuleSpec(id="has", when="has(args.path)", effect="deny"),
    ]
    rules = {r.spec.id: r for r in compile_rules(specs, {}, "<test>")}
    assert rules["flat"].flat is not None and rules["literal"].flat is not None
    assert rules["index"].flat is None and rules["size"].flat is None and rules["has"].flat is None
