"""One upstream call that never answers (issue 43, a regression test: this held before and must
keep holding): the server's other calls complete while it hangs, multiplexed on the same session;
the hung call ends at its timeout and the server is told (`notifications/cancelled`: the tool
sees its cancel); the session stays the same (no restart for one slow call). A server that
answers nothing at all (a stopped process) is restarted after its call times out and a ping goes
unanswered, and another server of the same gateway never notices. Real servers over stdio."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _mcp_helpers import demo_stdio

from toolroute import ToolRouter
from toolroute.errors import ToolTimeoutError
from toolroute.mcp import connection
from toolroute.mcp.gateway import McpGateway

TIMEOUT = 4.0  # the hung call's deadline; every other call must finish well before it


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def _wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path.exists()


def test_a_hung_call_delays_no_other_call_and_ends_at_its_timeout_with_the_server_told(tmp_path: Path) -> None:
    demo = demo_stdio("demo", timeout=TIMEOUT)
    demo["args"].append("--long")  # tools that wait for a cancel
    config = {"mcpServers": {"demo": demo}}
    with McpGateway(config) as gateway:
        router = ToolRouter(gateway=gateway)
        pid = router.execute("pid", {}).text
        marker = tmp_path / "hung"
        started_at = time.monotonic()
        hung, box = _in_thread(lambda: router.execute("until_cancelled", {"marker": str(marker)}))
        assert _wait_for(Path(f"{marker}.started"), 20), "the hung call never reached the server"
        for i in range(20):
            assert router.execute("echo", {"text": str(i)}).text == f"demo:{i}"
        # All twenty answered while the hung call was still waiting: none queued behind it.
        assert hung.is_alive() and not Path(f"{marker}.cancelled").exists()
        hung.join(TIMEOUT + 20)
        assert not hung.is_alive()
        assert isinstance(box.get("error"), ToolTimeoutError), box
        assert time.monotonic() - started_at >= TIMEOUT
        assert _wait_for(Path(f"{marker}.cancelled"), 10), "the server was never told of the cancel"
        # The same process, the same session: one slow call restarts nothing.
        assert router.execute("pid", {}).text == pid
        assert gateway._services["demo"].connection.unresponsive == 0


def test_a_server_that_answers_nothing_is_restarted_and_the_others_never_notice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connection, "PING_TIMEOUT", 1.0)
    frozen = demo_stdio("frozen", timeout=2.0)
    frozen["args"].append("--long")
    config = {"mcpServers": {"frozen": frozen, "well": demo_stdio("well")}}
    with McpGateway(config) as gateway:
        router = ToolRouter(gateway=gateway)
        first_pid = router.execute("frozen_pid" if "frozen_pid" in _names(router) else "pid", {}).text
        with pytest.raises(ToolTimeoutError):
            router.execute("freeze", {})
        # The other server answers at once, while the frozen one is pinged and restarted.
        assert router.execute("well_echo" if "well_echo" in _names(router) else "echo", {"text": "x"}).text
        conn = gateway._services["frozen"].connection
        deadline = time.monotonic() + 20
        while conn.unresponsive == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert conn.unresponsive == 1
        again = router.execute("frozen_pid" if "frozen_pid" in _names(router) else "pid", {}).text
        assert again != first_pid  # a fresh process


def _names(router: ToolRouter) -> set[str]:
    return {t["function"]["name"] for t in router.get_all_tools([], ["frozen", "well"])}
