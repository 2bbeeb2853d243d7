"""Real servers over stdio through the router: our SDK-written server, a paging low-level server and
the third-party `mcp-server-time` from PyPI."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import jsonschema
import pytest
from _mcp_helpers import demo_stdio, script_stdio, time_server

from toolroute import ToolRouter
from toolroute.errors import ToolExecutionError, ToolNotFoundError, ToolTimeoutError
from toolroute.mcp import McpGateway


@pytest.fixture(scope="module")
def gateway() -> Iterator[McpGateway]:
    config = {
        "mcpServers": {
            "demo": demo_stdio("demo", timeout=1.5),
            "paged": script_stdio("paged_server.py"),
            "time": time_server(),
        }
    }
    with McpGateway(config, call_timeout=30) as gw:
        yield gw


@pytest.fixture(scope="module")
def router(gateway: McpGateway) -> ToolRouter:
    return ToolRouter(gateway=gateway)  # not closed here: the gateway fixture owns the sessions


def _by_name(tools: list[dict]) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in tools}


def test_lazy_connect_on_first_call_then_round_trip(router: ToolRouter) -> None:
    assert router.invoke("add", {"a": 2, "b": 3}) == "5"
    assert router.invoke("echo", '{"text": "hi"}') == "demo:hi"


def test_projected_definitions_are_openai_valid_and_keep_nested_fields(gateway: McpGateway) -> None:
    tools = _by_name(gateway.get_global_mcp_tools(["demo"]))
    person = tools["describe"]["parameters"]["properties"]["person"]
    assert person["properties"]["address"]["required"] == ["street", "city"]
    for fn in tools.values():
        assert fn["parameters"]["type"] == "object"
        assert "$ref" not in json.dumps(fn["parameters"])
        jsonschema.Draft202012Validator.check_schema(fn["parameters"])


def test_nested_arguments_reach_the_server(router: ToolRouter) -> None:
    person = {"name": "Ada", "address": {"street": "1 Main", "city": "London"}, "tags": ["math"]}
    assert router.invoke("describe", {"person": person}) == "Ada lives in London (math)"


def test_illegal_and_long_names_are_sanitised_and_mapped_back(gateway: McpGateway, router: ToolRouter) -> None:
    names = set(_by_name(gateway.get_global_mcp_tools(["demo"])))
    assert "text_shout" in names and "text.shout" not in names
    long_names = [n for n in names if n.startswith("a_really_long")]
    assert len(long_names) == 1 and len(long_names[0]) == 64
    assert router.invoke("text_shout", {"text": "hey"}) == "HEY!"
    assert router.invoke(long_names[0]) == "long ok"
    assert gateway.renamed["demo/text.shout"] == "text_shout"


def test_pagination_follows_next_cursor(gateway: McpGateway, router: ToolRouter) -> None:
    names = [t["function"]["name"] for t in gateway.get_global_mcp_tools(["paged"])]
    assert names == ["p1", "p2", "p3", "p4", "p5"]  # the server returns two per page
    assert router.invoke("p5", {"x": 1}) == "paged:p5:{'x': 1}"


def test_third_party_time_server(gateway: McpGateway, router: ToolRouter) -> None:
    assert {"get_current_time", "convert_time"} <= set(_by_name(gateway.get_global_mcp_tools(["time"])))
    out = router.execute("get_current_time", {"timezone": "Asia/Tokyo"})
    assert json.loads(out.text)["timezone"] == "Asia/Tokyo"
    assert out.trace["structured_content"]["timezone"] == "Asia/Tokyo"
    with pytest.raises(ToolExecutionError, match="Mars/Olympus"):
        router.invoke("get_current_time", {"timezone": "Mars/Olympus"})


def test_is_error_result_raises_with_the_message(router: ToolRouter) -> None:
    with pytest.raises(ToolExecutionError, match="out of coffee") as info:
        router.invoke("fail", {"message": "out of coffee"})
    assert info.value.tool == "fail"


def test_structured_content_and_media_summaries(router: ToolRouter) -> None:
    out = router.execute("add", {"a": 1, "b": 1})
    assert out.trace["structured_content"] == {"result": 2}
    assert out.trace["mcp"] == {"service": "demo", "tool": "add"}
    media = router.execute("media")
    assert media.text.splitlines()[:3] == [
        "here you go",
        "[image: image/png, 14 bytes]",
        "[resource file:///notes.txt (text/plain, 11 bytes)]",
    ]
    assert "[resource link file:///big.bin (big.bin, application/octet-stream, 2048 bytes)]" in media.text
    assert [c["type"] for c in media.trace["content"]] == ["text", "image", "resource", "resource_link"]


def test_hung_call_times_out_and_the_session_stays_usable(router: ToolRouter) -> None:
    # AI4J has no per-request timeout; here the per-server `timeout` (1.5 s) bounds the call.
    with pytest.raises(ToolTimeoutError, match=r"did not answer the call to 'slow' within 1.5s"):
        router.invoke("slow", {"seconds": 60})
    assert router.invoke("add", {"a": 1, "b": 2}) == "3"


def test_unknown_tool_is_not_found_with_suggestions(router: ToolRouter) -> None:
    with pytest.raises(ToolNotFoundError) as info:
        router.invoke("ecko", {"text": "x"})
    assert "echo" in info.value.suggestions


def test_sync_invoke_from_inside_a_running_event_loop(router: ToolRouter) -> None:
    async def inside() -> str:
        return router.invoke("echo", {"text": "from a loop"})  # sync call, loop running here

    assert asyncio.run(inside()) == "demo:from a loop"


def test_async_callers_on_other_loops_and_threads(router: ToolRouter) -> None:
    async def many() -> list[str]:
        return list(await asyncio.gather(*(router.ainvoke("add", {"a": i, "b": 1}) for i in range(20))))

    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(asyncio.run(many()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[str(i + 1) for i in range(20)]] * 3


def test_concurrent_calls_share_one_session(gateway: McpGateway, router: ToolRouter) -> None:
    pid = router.invoke("pid")

    async def burst() -> list[str]:
        return list(await asyncio.gather(*(gateway.acall_tool("pid") for _ in range(10))))  # type: ignore[misc]

    outs = asyncio.run(burst())
    assert {o.text for o in outs} == {pid}  # type: ignore[attr-defined]


def test_direct_gateway_calls(gateway: McpGateway) -> None:
    assert gateway.call_tool("add", {"a": 4, "b": 4}).text == "8"
    with pytest.raises(ToolNotFoundError, match="no global MCP tool"):
        gateway.call_tool("no_such_tool", {})
