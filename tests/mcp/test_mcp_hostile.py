"""Hostile upstream servers stay contained (issue 11): real servers written with the `mcp` SDK
over stdio and streamable HTTP on 127.0.0.1, next to a healthy one.

No test asserts a duration; each blocking step runs under a generous bound so that a hang fails
the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from _mcp_helpers import HttpServer, demo_stdio, script_stdio

from toolroute import ToolRouter
from toolroute.errors import ToolExecutionError, ToolTimeoutError
from toolroute.mcp import McpGateway
from toolroute.mcp.results import DEFAULT_MAX_RESULT_CHARS
from toolroute.schema import MAX_SCHEMA_NODES

T = TypeVar("T")
BOUND = 180.0  # seconds: far beyond any healthy run on a loaded machine, short of a hang
HIDDEN_CHARS = ("\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\u2066", "\u2069", "\U000e0041", "\r")


def bounded(fn: Callable[[], T], seconds: float = BOUND) -> T:
    """`fn()` in a worker thread; a hang fails the test after `seconds` (a bound, not a timing)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=seconds)


def _count(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + sum(_count(v) for v in node.values())
    if isinstance(node, list):
        return 1 + sum(_count(v) for v in node)
    return 1


@pytest.fixture(params=["stdio", "http"])
def hostile(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if request.param == "stdio":
        yield script_stdio("hostile_server.py")
        return
    server = HttpServer(script="hostile_server.py").start()
    try:
        yield {"url": server.url}
    finally:
        server.stop()


@pytest.fixture
def gateway(hostile: dict[str, Any]) -> Iterator[McpGateway]:
    gw = McpGateway({"hostile": hostile, "ok": demo_stdio("ok")})
    yield gw
    gw.close()


def _by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in tools}


def test_schemas_past_the_budget_refuse_one_tool_and_keep_the_rest(gateway: McpGateway) -> None:
    router = ToolRouter(gateway=gateway)
    tools = _by_name(bounded(lambda: router.get_all_tools([], ["hostile", "ok"])))
    # 80 JSON levels deep even with references kept: that one tool is refused, with the reason.
    assert "abyss" not in tools
    assert "nested deeper than" in gateway.skipped_tools["hostile/abyss"]
    # 2**40 nodes if inlined: kept compact instead (references into one $defs), bounded in size.
    params = tools["exponential"]["parameters"]
    assert params["properties"]["root"] == {"$ref": "#/$defs/L40"}
    assert len(params["$defs"]) == 41 and _count(params) <= MAX_SCHEMA_NODES
    assert "hostile/exponential" not in gateway.skipped_tools
    # Its siblings and the other server work.
    assert {"parrot", "flood", "smuggle", "add", "echo"} <= tools.keys()
    assert bounded(lambda: router.invoke("parrot", {"text": "hi"})) == "hostile:hi"
    assert bounded(lambda: router.invoke("add", {"a": 2, "b": 3})) == "5"
    assert bounded(lambda: router.invoke("exponential", {"root": {}})) == "hostile:"


def test_a_50_mb_result_reaches_the_model_capped_with_a_notice(hostile: dict[str, Any]) -> None:
    # Over stdio the SDK joins a long line chunk by chunk (quadratic: 50 MB takes minutes on a
    # loaded machine before toolroute sees it), so stdio floods 5 MB; HTTP carries the full 50 MB.
    size = 50_000_000 if "url" in hostile else 5_000_000
    with McpGateway({"hostile": {**hostile, "timeout": BOUND}, "ok": demo_stdio("ok")}) as gw:
        router = ToolRouter(gateway=gw)
        out = bounded(lambda: router.execute("flood", {"mb": size / 1e6}))
        head, notice = out.text.rsplit("\n", 1)
        assert len(out.text) <= DEFAULT_MAX_RESULT_CHARS  # the notice fits inside the cap
        assert head.startswith("0123456789abcdef") and len(head) > DEFAULT_MAX_RESULT_CHARS - 300
        assert notice == (
            f"[... {size - len(head)} characters omitted of {size}; this gateway passes at most "
            f"{DEFAULT_MAX_RESULT_CHARS} characters of one MCP result; ask the tool for less (a narrower query, "
            "a page or a range) to see the rest ...]"
        )
        assert out.trace["truncated"] == {
            "shown_chars": len(head),
            "total_chars": size,
            "max_chars": DEFAULT_MAX_RESULT_CHARS,
        }
        # The server and its neighbour still answer afterwards.
        assert bounded(lambda: router.invoke("parrot", {"text": "after"})) == "hostile:after"
        assert bounded(lambda: router.invoke("echo", {"text": "too"})) == "ok:too"


def test_the_cap_is_a_gateway_option(hostile: dict[str, Any]) -> None:
    with McpGateway({"hostile": hostile}, max_result_chars=1000) as gw:
        text = bounded(lambda: gw.call_tool("flood", {"mb": 0.01})).text
    head, notice = text.rsplit("\n", 1)
    assert len(text) <= 1000 and len(head) > 700 and f"[... {10000 - len(head)} characters omitted of 10000;" in notice
    with pytest.raises(ValueError, match="max_result_chars"):
        McpGateway({}, max_result_chars=0)


def test_control_sequences_never_reach_the_model(gateway: McpGateway) -> None:
    router = ToolRouter(gateway=gateway)
    tools = _by_name(bounded(lambda: router.get_all_tools([], ["hostile"])))
    description = tools["smuggle"]["description"]
    result = bounded(lambda: router.invoke("smuggle", {"text": "x"}))
    with pytest.raises(ToolExecutionError) as info:
        bounded(lambda: router.invoke("smuggle_error", {"text": "x"}))
    for text in (description, result, str(info.value), json.dumps(tools, ensure_ascii=False)):
        assert not any(ch in text for ch in HIDDEN_CHARS), text
    assert (
        description
        == "Looks harmless\\x1b[2J\\x1b]0;pwned\\x07\\u202eevil\\u202c\\u2066x\\u2069\\U000e0041\\x9b31m\\x0d"
    )
    assert result.startswith("visible\\x1b[2J") and result.endswith("\\x0dtext")
    assert "denied\\x1b[2J" in str(info.value)


def test_a_hung_server_delays_only_its_own_calls() -> None:
    config = {
        "stuck": demo_stdio("stuck", timeout=20),  # answers the handshake, then `slow` never returns
        "hung": script_stdio("hung_server.py", connectTimeout=20),  # never answers at all
        "ok": script_stdio("hostile_server.py"),  # its `parrot` is the healthy tool here
    }
    with McpGateway(config) as gw:
        router = ToolRouter(gateway=gw)
        bounded(lambda: gw.get_global_mcp_tools(["stuck", "ok"]))
        outcomes: dict[str, BaseException | None] = {}

        def run(key: str, fn: Callable[[], Any]) -> None:
            try:
                fn()
                outcomes[key] = None
            except BaseException as exc:
                outcomes[key] = exc

        waiting = [
            threading.Thread(target=run, args=("slow", lambda: router.invoke("slow", {"seconds": 3600})), daemon=True),
            threading.Thread(target=run, args=("hung", lambda: gw.get_global_mcp_tools(["hung"])), daemon=True),
        ]
        for t in waiting:
            t.start()
        # Many calls to the healthy server, concurrently, while the others hang.
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda i: router.invoke("parrot", {"text": str(i)}), range(8), timeout=BOUND))
        assert answers == [f"hostile:{i}" for i in range(8)]
        assert all(t.is_alive() for t in waiting)  # still waiting: they did not hold anything up
        for t in waiting:
            t.join(BOUND)
        assert not any(t.is_alive() for t in waiting)
        assert isinstance(outcomes["slow"], ToolTimeoutError) and "within 20" in str(outcomes["slow"])
        assert isinstance(outcomes["hung"], ToolTimeoutError) and "handshake" in str(outcomes["hung"])
        assert router.invoke("parrot", {"text": "still"}) == "hostile:still"
