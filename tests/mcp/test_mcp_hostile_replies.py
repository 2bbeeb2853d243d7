"""Hostile upstream replies bounded (issue 55): a raw server (`raw_server.py`, bytes written by
hand) over real stdio and HTTP on 127.0.0.1 sends what no SDK would: replies that are not UTF-8,
not JSON or nested 100,000 deep, a storm of 20,000 `notifications/tools/list_changed` from one
call, and a listing of 100,000 tools. Each fails that call (or that listing) with its reason,
not at the call's timeout; the server's other calls and a second server go on; logs and memory
stay bounded. No test asserts a duration: the call timeout is long (a hang shows as a timeout
error), and each blocking step runs under a generous bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from _mcp_helpers import HttpServer, demo_stdio, script_stdio, wait_until

from toolroute import ToolRouter
from toolroute.errors import ToolExecutionError, ToolTimeoutError
from toolroute.mcp import McpGateway

CALL_TIMEOUT = 120  # seconds: a call left waiting shows as a timeout error, never a pass
T = TypeVar("T")


def bounded(fn: Callable[[], T], seconds: float = 300.0) -> T:
    """`fn()` in a worker thread; a hang fails the test after `seconds` (a bound, not a timing)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=seconds)


@contextmanager
def _raw(transport: str, *flags: str) -> Iterator[dict[str, Any]]:
    if transport == "stdio":
        entry = script_stdio("raw_server.py")
        entry["args"] += list(flags)
        yield {**entry, "timeout": CALL_TIMEOUT}
        return
    server = HttpServer(script="raw_server.py", flags=flags).start()
    try:
        yield {"url": server.url, "timeout": CALL_TIMEOUT}
    finally:
        server.stop()


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        ("badutf8", "not valid UTF-8"),
        ("notjson", "not JSON"),
        ("deep", "nested deeper"),
    ],
)
def test_a_malformed_reply_fails_that_call_at_once(transport: str, tool: str, reason: str) -> None:
    with _raw(transport) as raw:
        gw = McpGateway({"raw": raw, "ok": demo_stdio("ok")})
        try:
            router = ToolRouter(gateway=gw)
            bounded(lambda: router.get_all_tools([], ["raw", "ok"]))
            with pytest.raises(ToolExecutionError) as failed:
                bounded(lambda: router.invoke(tool, {"text": "x"}))
            assert not isinstance(failed.value, ToolTimeoutError)
            message = str(failed.value)
            # The SDK's HTTP transport words it its own way; the stdio reader says what was wrong.
            assert ("Failed to parse JSON response" in message) if transport == "http" else (reason in message)
            # The same session, the same server, and the other server answer on.
            assert bounded(lambda: router.invoke("say", {"text": "after"})) == "raw:after"
            assert bounded(lambda: router.invoke("add", {"a": 2, "b": 3})) == "5"
        finally:
            gw.close()


def test_a_storm_of_list_changes_is_one_relist_and_one_log_line(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolroute")
    with _raw(transport, "--storm", "20000") as raw:
        gw = McpGateway({"raw": raw, "ok": demo_stdio("ok")})
        try:
            router = ToolRouter(gateway=gw)
            bounded(lambda: router.get_all_tools([], ["raw", "ok"]))
            before = _rss_mb()
            assert bounded(lambda: router.invoke("storm", {})) == "stormed"
            lists = gw._lists  # the gateway's loading, to see the re-lists end
            assert wait_until(lambda: lists.relister.in_flight() == 0, timeout=120)
            assert bounded(lambda: router.invoke("add", {"a": 1, "b": 1})) == "2"
            grown = _rss_mb() - before
        finally:
            gw.close()
    ours = [r for r in caplog.records if r.name.startswith("toolroute")]
    assert len(ours) < 50, [r.getMessage() for r in ours[:60]]
    bursts = [r.getMessage() for r in ours if "notifications, re-listed" in r.getMessage()]
    assert len(bursts) <= 3 and any("20000" in b or "re-listed" in b for b in bursts)
    assert grown < 60, f"RSS grew {grown:.0f} MB over the storm"


def test_a_listing_past_its_byte_cap_is_refused_unparsed(transport: str) -> None:
    with _raw(transport, "--tools", "100000") as raw:
        gw = McpGateway({"raw": raw, "ok": demo_stdio("ok")})
        try:
            router = ToolRouter(gateway=gw)
            before = _rss_mb()
            with pytest.raises(ToolExecutionError, match="maxListingBytes"):
                bounded(lambda: router.get_all_tools([], ["raw"]))
            assert _rss_mb() - before < 80  # a 12 MB reply, never parsed into 100,000 models
            assert bounded(lambda: router.invoke("add", {"a": 2, "b": 2})) == "4"
        finally:
            gw.close()


def test_a_listing_past_its_tool_cap_is_refused_and_the_server_left_out(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    with _raw(transport, "--tools", "3000") as raw:
        gw = McpGateway({"raw": {**raw, "maxTools": 1000}, "ok": demo_stdio("ok")})
        try:
            router = ToolRouter(gateway=gw)
            with pytest.raises(ToolExecutionError, match=r"more than 1000 tools \(maxTools\)"):
                bounded(lambda: router.get_all_tools([], ["raw"]))
            names = {t["function"]["name"] for t in bounded(lambda: router.get_all_tools([], ["ok"]))}
            assert "add" in names and "t000001" not in names
        finally:
            gw.close()


def test_caps_are_validated() -> None:
    with pytest.raises(Exception, match="maxTools"):
        McpGateway({"raw": {**script_stdio("raw_server.py"), "maxTools": 0}})
    with pytest.raises(Exception, match="maxListingBytes"):
        McpGateway({"raw": {**script_stdio("raw_server.py"), "maxListingBytes": "big"}})


def test_lines_past_their_limit_are_skipped_whole_and_reported_once() -> None:
    from toolroute.mcp.stdio import _Lines

    listing = b'{"jsonrpc":"2.0","id":7,"result":{"tools":['
    lines = _Lines(lambda head: 40 if b'"id":7' in head else 100, floor=40)
    assert lines.feed(b'{"a":1}\n{"b":') == ([b'{"a":1}'], None)
    assert lines.feed(b"2}\n") == ([b'{"b":2}'], None)
    # A reply to request 7 (a listing, say) is cut at 40 bytes; what follows it is skipped.
    got, over = lines.feed(listing + b"x" * 30)
    assert got == [] and over is not None and over.startswith(listing)
    assert lines.feed(b"y" * 1000) == ([], None)  # still the same line: reported once
    assert lines.feed(b'y]}}\n{"c":3}\n') == ([b'{"c":3}'], None)
    # Another line may be longer: its limit is 100.
    assert lines.feed(b'{"id":8,"d":"' + b"z" * 60 + b'"}\n')[0] != []


def test_malformed_lines_say_what_is_wrong_and_name_their_request() -> None:
    from toolroute.mcp.stdio import malformed, named_id

    assert malformed(b'{"jsonrpc":"2.0","id":1,"result":{}}')[1] is None
    assert "not valid UTF-8" in str(malformed(b'{"jsonrpc":"2.0","id":1,"result":{"x":"\xff"}}')[1])
    assert "nested deeper" in str(malformed(b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 5000 + b"]" * 5000 + b"}")[1])
    assert "not JSON" in str(malformed(b"hello")[1])
    assert "not a JSON-RPC message" in str(malformed(b'{"hello": 1}')[1])
    assert named_id(b'{"jsonrpc":"2.0","id":12,"result":{"x":"\xff"}}') == 12
    assert named_id(b'{"jsonrpc":"2.0","id" : "abc","result":[[[[') == "abc"
    assert named_id(b"garbage") is None
