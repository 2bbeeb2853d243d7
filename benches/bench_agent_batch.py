"""A model's batch of 50 calls through the agent layer vs calling the router one by one, interleaved.

Run: python -m pytest benches/bench_agent_batch.py -s   (benches/_interleave.py; both sides must
return the same outputs in the same order)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _interleave import compare

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute.agent import AgentToolCall, ToolCallRunner, allow_all

CALLS = 50
FILES = 50
ROUNDS = 15


def batch(router: ToolRouter, calls: list[AgentToolCall], **options: Any) -> Callable[[], list[str]]:
    """The agent layer: read-only calls concurrently, the rest serially, results in order."""
    runner = ToolCallRunner(router, policy=allow_all(), **options)
    return lambda: [r.output for r in runner.run(calls)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agent_bench")
    for i in range(FILES):
        pkg = root / f"pkg{i % 5}"
        pkg.mkdir(exist_ok=True)
        body = "".join(f"def f{i}_{j}(x):\n    return x + {j}  # TODO item {j}\n" for j in range(2000))
        (pkg / f"mod{i}.py").write_text(body)
    return root


def one_by_one(router: ToolRouter, calls: list[AgentToolCall]) -> Callable[[], list[str]]:
    """What a host does without the agent layer: invoke each call in turn."""
    return lambda: [router.invoke(c.name, c.arguments) for c in calls]


# ---- built-ins: grep and glob (Rust, GIL released), and a mix with read_file -------------------


def search_calls() -> list[AgentToolCall]:
    calls = []
    for i in range(CALLS):
        if i % 2:
            calls.append(AgentToolCall("grep", json.dumps({"pattern": rf"item 1{i % 10}\d", "path": f"pkg{i % 5}"})))
        else:
            calls.append(AgentToolCall("glob", json.dumps({"pattern": f"pkg{i % 5}/*.py"})))
    return calls


def mixed_calls() -> list[AgentToolCall]:
    calls = []
    for i in range(CALLS):
        if i % 5 == 3:
            calls.append(AgentToolCall("grep", json.dumps({"pattern": rf"item 1{i}\d", "path": f"pkg{i % 5}"})))
        elif i % 5 == 4:
            calls.append(AgentToolCall("glob", json.dumps({"pattern": f"pkg{i % 5}/*.py"})))
        else:
            calls.append(AgentToolCall("read_file", json.dumps({"path": f"pkg{i % 5}/mod{i}.py", "limit": 2000})))
    return calls


@pytest.fixture(scope="module")
def builtin_router(tree: Path) -> Iterator[ToolRouter]:
    with ToolRouter(context=BuiltInToolContext(tree)) as router:
        yield router


@pytest.mark.parametrize(
    ("label", "calls"),
    [("grep/glob", search_calls), ("read_file/grep/glob", mixed_calls)],
    ids=["search", "mixed"],
)
def test_builtin_batch(builtin_router: ToolRouter, label: str, calls: Callable[[], list[AgentToolCall]]) -> None:
    batch_, loop = batch(builtin_router, calls()), one_by_one(builtin_router, calls())
    assert not any(out.startswith("Error") for out in loop()), "every call must succeed"
    compare(f"agent: 50 read-only built-in calls ({label})", ("toolroute", batch_), {"one by one": loop}, ROUNDS)


# ---- function tools doing real file I/O (runs on every branch) --------------------------------


@pytest.fixture(scope="module")
def function_router(tree: Path) -> ToolRouter:
    router = ToolRouter()

    @function_tool(name="digest_file", read_only=True, idempotent=True)
    def digest_file(path: str) -> dict[str, Any]:
        data = (tree / path).read_bytes()
        return {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    @function_tool(name="append_line")
    def append_line(path: str, line: str) -> str:
        with (tree / path).open("a") as f:
            f.write(line + "\n")
        return "ok"

    router.register(digest_file)
    router.register(append_line)
    return router


def digest_calls() -> list[AgentToolCall]:
    return [AgentToolCall("digest_file", json.dumps({"path": f"pkg{i % 5}/mod{i}.py"})) for i in range(CALLS)]


def test_function_batch(function_router: ToolRouter) -> None:
    batch_, loop = batch(function_router, digest_calls()), one_by_one(function_router, digest_calls())
    compare("agent: 50 read-only function tools (read + hash)", ("toolroute", batch_), {"one by one": loop}, ROUNDS)


# ---- the price of the layer on side-effecting calls (all serial) ------------------------------


def append_calls() -> list[AgentToolCall]:
    return [AgentToolCall("append_line", json.dumps({"path": "log.txt", "line": f"entry {i}"})) for i in range(CALLS)]


def test_serial_batch(function_router: ToolRouter) -> None:
    batch_, loop = batch(function_router, append_calls()), one_by_one(function_router, append_calls())
    compare("agent: 50 side-effecting calls (serial)", ("toolroute", batch_), {"one by one": loop}, ROUNDS)
