"""Issue 2 benchmarks: name resolution, batch sanitising, and invoke overhead, each side by side
with the plain-Python way (`_py_router.py`). In each group the toolroute case is named *toolroute*."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from _py_router import PyRouter, py_generate_api_function_name
from pydantic import BaseModel

import toolroute
from toolroute import ToolRouter, function_tool
from toolroute._core import RouteTable, ToolKind, encode_user_tool, generate_api_function_names

random.seed(7)
LEVEL_NAMES = {k: [f"{k}_tool_{i}" for i in range(200)] for k in ("builtin", "local", "function", "global")}
USERS = [f"u{i}" for i in range(50)]


def _tables() -> tuple[RouteTable, PyRouter]:
    rust, py = RouteTable(), PyRouter()
    levels = (
        (0, "builtin", py.builtin),
        (2, "local", py.local_mcp),
        (3, "function", py.function),
        (4, "global", py.global_mcp),
    )
    for kind, key, py_level in levels:
        for name in LEVEL_NAMES[key]:
            rust.insert(ToolKind(kind), name, name)
            py_level[name] = name
    for uid in USERS:
        for i in range(20):
            encoded = rust.insert_user(uid, f"t{i}", (uid, i))
            py.user[encoded] = (uid, (uid, i))
    return rust, py


def _workload() -> list[tuple[str, str | None]]:
    calls: list[tuple[str, str | None]] = []
    for _ in range(2000):
        roll = random.random()
        if roll < 0.3:
            uid = random.choice(USERS)
            calls.append((encode_user_tool(uid, f"t{random.randrange(20)}"), None))
        elif roll < 0.4:
            calls.append((f"t{random.randrange(20)}", random.choice(USERS)))
        elif roll < 0.45:
            calls.append((f"missing_{random.randrange(100)}", None))
        else:
            level = random.choice(list(LEVEL_NAMES))
            calls.append((random.choice(LEVEL_NAMES[level]), None))
    return calls


RUST_TABLE, PY_TABLE = _tables()
WORKLOAD = _workload()


def test_resolution_results_agree():
    for name, uid in WORKLOAD:
        rust, py = RUST_TABLE.resolve(name, uid), PY_TABLE.resolve(name, uid)
        assert (rust is None) == (py is None), name
        if rust is not None and py is not None:
            assert (rust[0], rust[1]) == (py[0], py[1]), name


@pytest.mark.benchmark(group="core: resolve 2000 names through the 5-level precedence")
def test_resolve_toolroute(benchmark):
    resolve = RUST_TABLE.resolve
    benchmark(lambda: [resolve(n, u) for n, u in WORKLOAD])


@pytest.mark.benchmark(group="core: resolve 2000 names through the 5-level precedence")
def test_resolve_plain_python(benchmark):
    resolve = PY_TABLE.resolve
    benchmark(lambda: [resolve(n, u) for n, u in WORKLOAD])


PAIRS = [
    (random.choice(["github", "my.svc", "123svc", "a b c", "s" * 70, "weather-api"]), f"tool {i}.x")
    for i in range(10_000)
]


def test_sanitising_agrees():
    assert generate_api_function_names(PAIRS) == [py_generate_api_function_name(s, t) for s, t in PAIRS]


@pytest.mark.benchmark(group="core: sanitise 10,000 service/tool pairs")
def test_sanitize_toolroute(benchmark):
    benchmark(generate_api_function_names, PAIRS)


@pytest.mark.benchmark(group="core: sanitise 10,000 service/tool pairs")
def test_sanitize_plain_python(benchmark):
    benchmark(lambda: [py_generate_api_function_name(s, t) for s, t in PAIRS])


class AddRequest(BaseModel):
    a: int
    b: int


@function_tool
class Add:
    def apply(self, request: AddRequest) -> int:
        return request.a + request.b


ARGS = json.dumps({"a": 1, "b": 2})
ROUTER = ToolRouter(builtins={})
ROUTER.register(Add)


@pytest.mark.benchmark(group="core: invoke a trivial function tool")
def test_invoke_toolroute(benchmark):
    assert ROUTER.invoke("Add", ARGS) == "3"
    benchmark(ROUTER.invoke, "Add", ARGS)


@pytest.mark.benchmark(group="core: invoke a trivial function tool")
def test_invoke_pydantic_validation_only(benchmark):
    """The floor: pydantic parsing the same arguments and the result turned into JSON."""
    import pydantic_core

    tool = Add()

    def direct() -> bytes:
        return pydantic_core.to_json(tool.apply(AddRequest.model_validate_json(ARGS)))

    benchmark(direct)


BUILTIN_NAMES = list(toolroute.BUILTIN_TOOL_NAMES)
DEFAULT_ROUTER = ToolRouter()


def _plain_builtin_definitions() -> list[dict]:
    """What a host without toolroute does: each built-in's schema from its pydantic model."""
    from toolroute.builtins import builtin_tools

    tools = builtin_tools()
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": tools[n].description,
                "parameters": tools[n].request_model.model_json_schema(),
            },
        }
        for n in BUILTIN_NAMES
    ]


def test_builtin_listing_agrees():
    listed = DEFAULT_ROUTER.get_all_tools(BUILTIN_NAMES)
    assert [t["function"]["name"] for t in listed] == [t["function"]["name"] for t in _plain_builtin_definitions()]


@pytest.mark.benchmark(group="core: get_all_tools of the 8 built-ins")
def test_list_builtins_toolroute(benchmark):
    benchmark(DEFAULT_ROUTER.get_all_tools, BUILTIN_NAMES)


@pytest.mark.benchmark(group="core: get_all_tools of the 8 built-ins")
def test_list_builtins_plain_pydantic(benchmark):
    benchmark(_plain_builtin_definitions)


@function_tool(name="add_quick", quick=True)
def add_quick(a: int, b: int) -> int:
    return a + b


ROUTER.register(add_quick)
CALLS = 200
QUICK_ARGS = json.dumps({"a": 1, "b": 2})


async def _ainvoke_many() -> list[str]:
    return [await ROUTER.ainvoke("add_quick", QUICK_ARGS) for _ in range(CALLS)]


def test_quick_tool_answers_agree():
    assert asyncio.run(_ainvoke_many()) == [ROUTER.invoke("add_quick", QUICK_ARGS)] * CALLS


@pytest.mark.benchmark(group="core: 200 calls of a quick sync tool, async vs sync caller")
def test_ainvoke_quick_toolroute(benchmark):
    benchmark(lambda: asyncio.run(_ainvoke_many()))  # one event loop for all 200 calls, as an agent has


@pytest.mark.benchmark(group="core: 200 calls of a quick sync tool, async vs sync caller")
def test_invoke_quick_sync_caller(benchmark):
    benchmark(lambda: [ROUTER.invoke("add_quick", QUICK_ARGS) for _ in range(CALLS)])
