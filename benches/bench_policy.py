"""An operator's policy of 50 rules against none (issue 59: under 5 us of policy work per library
`invoke`), interleaved by benches/_interleave.py, which checks both give the same results.

Two cases: a tool no rule's `args` concern (its view is decided once per caller, so a call pays a
cached lookup and the wrapper), and a tool one `args` rule concerns (a call evaluates that rule).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from _interleave import compare
from mcp import Client

from toolroute import ToolRouter, function_tool
from toolroute.policy import Policy


@function_tool(name="add", read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool(name="lookup", read_only=True)
def lookup(path: str) -> str:
    """Look a path up."""
    return path.upper()


def fifty_rules() -> Policy:
    """25 rules a caller's view decides (other tools, by role) and 25 over other tools' `args`."""
    rules: list[dict[str, Any]] = []
    for i in range(25):
        rules.append(
            {"id": f"view-{i}", "when": f'tool.name == "t{i}" && !("admin" in user.claims.roles)', "effect": "deny"}
        )
    for i in range(24):
        rules.append(
            {"id": f"args-{i}", "when": f'tool.name == "u{i}" && args.path.startsWith("/x{i}")', "effect": "deny"}
        )
    rules.append(
        {"id": "lookup-secrets", "when": 'tool.name == "lookup" && args.path.startsWith("/secret")', "effect": "deny"}
    )
    return Policy.from_dict({"default": "allow", "rules": rules})


def router(policy: Policy | None) -> ToolRouter:
    r = ToolRouter(policy=policy)
    r.register(add)
    r.register(lookup)
    return r


PLAIN, POLICED = router(None), router(fifty_rules())
ADD_ARGS = json.dumps({"a": 2, "b": 40})
LOOKUP_ARGS = json.dumps({"path": "/public/readme"})


def thousand(fn: Callable[[], Any]) -> Callable[[], list[Any]]:
    return lambda: [fn() for _ in range(1000)]  # one call is too short to time alone


def test_policy_invoke_no_rule_reads_the_tools_args() -> None:
    compare(
        "policy: invoke x1000, 50 rules, none reading this tool's args",
        ("no policy", thousand(partial(PLAIN.invoke, "add", ADD_ARGS))),
        {"50 rules": thousand(partial(POLICED.invoke, "add", ADD_ARGS))},
        30,
    )


def test_policy_invoke_one_rule_reads_the_tools_args() -> None:
    compare(
        "policy: invoke x1000, 50 rules, one reading this tool's args",
        ("no policy", thousand(partial(PLAIN.invoke, "lookup", LOOKUP_ARGS))),
        {"50 rules": thousand(partial(POLICED.invoke, "lookup", LOOKUP_ARGS))},
        30,
    )


async def _session(server: Any) -> list[str]:
    """An MCP client session of 50 calls (in process: the served path without HTTP's noise)."""
    out = []
    async with Client(server) as client:
        for i in range(50):
            result = await client.call_tool("lookup", {"path": f"/public/{i}"})
            out.append("".join(getattr(c, "text", "") for c in result.content))
    return out


def test_policy_served_session_of_50_calls() -> None:
    from toolroute.serve import ServedTools, build_server

    plain, policed = build_server(ServedTools(PLAIN, ["lookup"])), build_server(ServedTools(POLICED, ["lookup"]))
    compare(
        "policy: served MCP session of 50 calls, 50 rules (one reading the tool's args)",
        ("no policy", lambda: anyio.run(_session, plain)),
        {"50 rules": lambda: anyio.run(_session, policed)},
        10,
    )


def _before(view: Any) -> Callable[[dict[str, Any]], Any]:
    """A view's per-call decision as it was before flat arguments: `args` added to a per-view
    `cel.Context` as a map each call (which discards the binding's converted environment)."""
    import cel

    wanted = set().union(*(rule.variables for rule in view.pending)) - {"args"}
    context = cel.Context({k: v for k, v in view.context.items() if k in wanted})
    keys = view._arg_keys

    def decide(args: dict[str, Any]) -> Any:
        context.add_variable("args", {k: args[k] for k in keys if k in args})
        for rule in view.pending:
            hit = rule.matches(context)
            if hit or (hit is None and rule.fails_closed()):
                return rule.verdict
        return view.verdict

    return decide


def test_policy_one_args_rule_decision_before_and_now() -> None:
    """The rule evaluation alone (what a call with an `args` rule pays): before, `args` as a map
    added to the context each call; now, each `args.NAME` a variable of its own, read by the
    context's resolver (the context never changes, so its converted environment is kept)."""
    from toolroute.policy import current_subject

    tool = POLICED.resolve("lookup")  # the policed tool: its view for the library caller
    view = tool.view  # type: ignore[attr-defined]
    assert current_subject(None) is not None and view.pending
    before = _before(view)
    calls = [{"path": f"/public/{i}"} for i in range(999)] + [{"path": "/secret/key"}]
    compare(
        "policy: one args rule's decision x1000 (varied paths, one refused)",
        ("now (flat variables)", lambda: [view.decide(a) for a in calls]),
        {"before (args map per call)": lambda: [before(a) for a in calls]},
        30,
    )
