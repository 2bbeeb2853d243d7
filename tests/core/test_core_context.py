from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from _core_helpers import builtin_named
from pydantic import BaseModel

from toolroute import (
    BuiltInToolContext,
    PathDeniedError,
    ToolLimits,
    ToolOutput,
    ToolRouter,
    builtin_tool_context,
    current_builtin_tool_context,
    pop_builtin_tool_context,
    push_builtin_tool_context,
)
from toolroute.builtins import BuiltinRequest, BuiltinTool


def test_push_pop_stack(tmp_path: Path):
    a, b = BuiltInToolContext(tmp_path), BuiltInToolContext(tmp_path, limits=ToolLimits(max_read_lines=5))
    assert current_builtin_tool_context() is None
    push_builtin_tool_context(a)
    push_builtin_tool_context(b)
    assert current_builtin_tool_context() is b
    assert pop_builtin_tool_context() is b
    assert current_builtin_tool_context() is a
    assert pop_builtin_tool_context() is a
    assert pop_builtin_tool_context() is None
    with builtin_tool_context(a):
        with builtin_tool_context(b):
            assert current_builtin_tool_context() is b
        assert current_builtin_tool_context() is a
    assert current_builtin_tool_context() is None
    with pytest.raises(TypeError):
        push_builtin_tool_context("not a context")  # type: ignore[arg-type]


def test_bad_roots_and_limits_fail_at_construction(tmp_path: Path):
    with pytest.raises(PathDeniedError, match="cannot be used"):
        BuiltInToolContext(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(PathDeniedError):
        BuiltInToolContext(tmp_path, read_only_roots=[tmp_path / "file"])
    with pytest.raises(ValueError, match="positive"):
        ToolLimits(max_output_chars=0)


def test_context_resolve_confines(tmp_path: Path):
    ws, ro = tmp_path / "ws", tmp_path / "ro"
    ws.mkdir()
    ro.mkdir()
    ctx = BuiltInToolContext(ws, read_only_roots=[ro])
    assert ctx.resolve("a/b.txt", write=True) == ws.resolve() / "a/b.txt"
    assert ctx.resolve(str(ro / "x")) == ro.resolve() / "x"
    with pytest.raises(PathDeniedError, match="read-only"):
        ctx.resolve(str(ro / "x"), write=True)
    with pytest.raises(PathDeniedError, match="outside the allowed roots"):
        ctx.resolve("../elsewhere")


class WhereRequest(BuiltinRequest):
    pass


def _where(request: BaseModel, ctx: BuiltInToolContext) -> ToolOutput:
    return ToolOutput(str(ctx.workspace_root))


def _router() -> ToolRouter:
    return ToolRouter(builtins={"where": BuiltinTool("where", "workspace", WhereRequest, _where, read_only=True)})


def test_threads_each_see_their_own_context(tmp_path: Path):
    router = _router()
    roots = []
    for i in range(8):
        (tmp_path / f"w{i}").mkdir()
        roots.append(tmp_path / f"w{i}")
    barrier = threading.Barrier(len(roots))
    seen: dict[int, list[str]] = {}

    def worker(i: int) -> None:
        with builtin_tool_context(BuiltInToolContext(roots[i])):
            barrier.wait()  # all contexts pushed at once before anyone reads
            seen[i] = [router.invoke("where") for _ in range(50)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(roots))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, outputs in seen.items():
        assert set(outputs) == {str(roots[i])}
    assert current_builtin_tool_context() is None  # nothing leaked into this thread


def test_asyncio_tasks_each_see_their_own_context(tmp_path: Path):
    router = _router()
    roots = []
    for i in range(10):
        (tmp_path / f"t{i}").mkdir()
        roots.append(tmp_path / f"t{i}")

    async def task(i: int, gate: asyncio.Event) -> set[str]:
        with builtin_tool_context(BuiltInToolContext(roots[i])):
            await gate.wait()  # interleave: every task holds its context while others run
            return {await router.ainvoke("where") for _ in range(5)} | {router.invoke("where")}

    async def main() -> list[set[str]]:
        gate = asyncio.Event()
        tasks = [asyncio.create_task(task(i, gate)) for i in range(len(roots))]
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    assert results == [{str(r)} for r in roots]


def test_router_default_context_is_used_when_none_is_pushed(tmp_path: Path):
    router = ToolRouter(builtins={"where": builtin_named("where")}, context=BuiltInToolContext(tmp_path))
    assert router.invoke("where", {"path": "p"}) == "builtin:p"
