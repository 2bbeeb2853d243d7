"""Lifecycle with real processes: lazy and eager connect, crash mid-call, hung servers, reconnect,
list_changed refresh, and a shutdown that leaves no child process behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _mcp_helpers import demo_stdio, descendants, mcp_children, script_stdio, wait_until

from toolroute import ToolRouter
from toolroute.errors import ToolExecutionError, ToolNotFoundError, ToolTimeoutError
from toolroute.mcp import McpGateway


def _alive(pid: int) -> bool:
    return pid in descendants()


def test_lazy_gateway_starts_nothing_until_first_use() -> None:
    before = mcp_children()
    with McpGateway({"lazy": demo_stdio("lazy")}) as gw:
        router = ToolRouter(gateway=gw)
        assert mcp_children() == before
        assert router.invoke("echo", {"text": "x"}) == "lazy:x"  # the miss triggers refresh + connect
        assert len(mcp_children() - before) == 1


def test_crash_mid_call_is_reported_then_reconnected_without_touching_others() -> None:
    config = {"a": demo_stdio("a", "only_a"), "b": demo_stdio("b", "only_b")}
    with McpGateway(config, eager=True) as gw:
        router = ToolRouter(gateway=gw)
        pid_a, pid_b = router.invoke("a_pid"), router.invoke("b_pid")
        with pytest.raises(ToolExecutionError, match="'a' closed the connection during the call to 'crash'") as info:
            router.invoke("a_crash")
        assert "demo server a starting" in str(info.value)  # the server's stderr tail explains the failure
        assert wait_until(lambda: not _alive(int(pid_a)))
        assert router.invoke("b_pid") == pid_b  # the other server kept its session and process
        new_pid = router.invoke("a_pid")  # reconnected on the next call
        assert new_pid != pid_a
        service = gw._services["a"]
        assert wait_until(lambda: service.listed_on == service.connection.connects == 2)  # re-listed after restart
        assert router.invoke("only_a") == "a:only_a"


def test_a_server_that_died_between_calls_is_restarted_transparently() -> None:
    with McpGateway({"d": demo_stdio("d")}, eager=True) as gw:
        pid = int(gw.call_tool("pid").text)
        os.kill(pid, 9)
        assert wait_until(lambda: not _alive(pid))
        assert wait_until(lambda: not gw._services["d"].connection.connected)  # EOF seen by the SDK
        assert gw.call_tool("add", {"a": 1, "b": 1}).text == "2"
        assert int(gw.call_tool("pid").text) != pid


def test_hung_server_times_out_at_connect_and_others_still_work() -> None:
    config = {"hung": script_stdio("hung_server.py", connectTimeout=1), "ok": demo_stdio("ok", "only_ok")}
    with McpGateway(config) as gw:
        router = ToolRouter(gateway=gw)
        with pytest.raises(ToolTimeoutError, match=r"'hung' .*did not complete the MCP handshake within 1.0s") as info:
            gw.get_global_mcp_tools(["hung"])
        assert "hung server: reading forever" in str(info.value)
        assert router.invoke("only_ok") == "ok:only_ok"  # the miss refreshed 'ok'; 'hung' is in back-off
        assert "hung" in gw.errors()
        assert [t["function"]["name"] for t in gw.get_global_mcp_tools(["ok"])][:2] == ["add", "echo"]


def test_bad_command_gives_a_clear_error() -> None:
    with (
        McpGateway({"nope": {"command": "/nonexistent/mcp-server"}}) as gw,
        pytest.raises(ToolExecutionError, match=r"cannot connect to MCP server 'nope' .*No such file"),
    ):
        gw.get_global_mcp_tools(["nope"])


def test_list_changed_notification_refreshes_the_tool_list() -> None:
    with McpGateway({"dyn": demo_stdio("dyn")}, eager=True) as gw:
        router = ToolRouter(gateway=gw)
        assert "fresh_tool" not in gw.global_tool_names()
        assert router.invoke("enable_extra", {"tool": "fresh_tool"}) == "ok"
        assert wait_until(lambda: "fresh_tool" in gw.global_tool_names())
        assert "fresh_tool" in [t["function"]["name"] for t in gw.get_global_mcp_tools(["dyn"])]
        assert router.invoke("fresh_tool") == "fresh_tool ok"


def test_close_leaves_no_child_process_and_later_calls_fail_clearly() -> None:
    before = mcp_children()
    gw = McpGateway({"x": demo_stdio("x"), "y": demo_stdio("y"), "z": script_stdio("paged_server.py")}, eager=True)
    router = ToolRouter(gateway=gw)
    started = mcp_children() - before
    assert len(started) == 3
    router.invoke("x_pid")
    router.close()  # closes the gateway too
    assert not (mcp_children() & started)
    assert not (descendants() & started)
    with pytest.raises(ToolExecutionError, match="closed"):
        gw.call_tool("x_pid")
    gw.close()  # idempotent


def test_async_with_connects_eagerly_and_closes_every_session() -> None:
    before = mcp_children()

    async def main() -> tuple[str, int]:
        async with McpGateway({"p": demo_stdio("p"), "q": demo_stdio("q")}, eager=True) as gw:
            count = len(mcp_children() - before)
            out = await gw.acall_tool("p_echo", {"text": "async"})
            return out.text, count

    text, count = asyncio.run(main())
    assert (text, count) == ("p:async", 2)
    assert mcp_children() == before


def test_cancelled_async_call_does_not_break_the_session() -> None:
    with McpGateway({"c": demo_stdio("c")}, eager=True) as gw:

        async def main() -> str:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(gw.acall_tool("slow", {"seconds": 30}), 0.5)
            return (await gw.acall_tool("add", {"a": 2, "b": 2})).text

        assert asyncio.run(main()) == "4"


def test_a_tool_removed_upstream_disappears_from_the_table() -> None:
    with McpGateway({"r": demo_stdio("r")}, eager=True) as gw:
        router = ToolRouter(gateway=gw)
        assert router.route("echo") is not None
        assert router.invoke("drop_tool", {"tool": "echo"}) == "dropped"
        assert wait_until(lambda: router.route("echo") is None)
        with pytest.raises(ToolNotFoundError):
            router.invoke("echo", {"text": "x"})


def test_a_gateway_nobody_closed_still_ends_its_servers_at_interpreter_exit(tmp_path: Path) -> None:
    script = tmp_path / "forgetful.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / 'testing')!r})\n"
        "from _mcp_helpers import demo_stdio\n"
        "from toolroute.mcp import McpGateway\n"
        "gw = McpGateway({'x': demo_stdio('x')}, eager=True)\n"
        "print(gw.call_tool('pid').text, flush=True)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    server_pid = int(done.stdout.split()[0])
    assert not Path(f"/proc/{server_pid}").exists() or "Z" in Path(f"/proc/{server_pid}/stat").read_text().split()[2]


def test_close_during_in_flight_calls_fails_them_instead_of_hanging() -> None:
    gw = McpGateway({"busy": demo_stdio("busy")}, eager=True)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            gw.call_tool("slow", {"seconds": 60})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    assert wait_until(lambda: len(gw._services["busy"].connection._session._dispatcher._pending) == 3)  # type: ignore[union-attr]
    gw.close()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert len(errors) == 3 and all(isinstance(e, ToolExecutionError) for e in errors)
