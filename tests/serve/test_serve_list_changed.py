"""`notifications/tools/list_changed` downstream (issue 23, part 2): when an upstream server's
tools change, a connected served client is told, lists again and sees (and can call) the new
tool; names it was shown before still run the tools they were shown for. Real processes: the
SDK's own client, `toolroute serve` over stdio and stateful HTTP, the demo server upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import demo_stdio
from _serve_helpers import http_server, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters


def serve_args(tmp_path: Path, upstream_era: str = "legacy") -> list[str]:
    """The demo server upstream, spoken to in `upstream_era` (2026-07-28: changes come on a
    `subscriptions/listen` stream the gateway keeps open)."""
    demo = {**demo_stdio("demo"), "protocol": upstream_era}
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"demo": demo}}))
    return ["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "demo"]


async def add_a_tool_upstream(target: object) -> dict[str, Any]:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(target, mode="legacy", message_handler=on_message) as client:  # type: ignore[arg-type]
        capabilities = client.server_capabilities
        before = {t.name for t in (await client.list_tools()).tools}
        (enable,) = [n for n in before if n.endswith("enable_extra")]
        (echo,) = [n for n in before if n.endswith("echo")]
        assert not (await client.call_tool(enable, {"tool": "fresh"})).is_error
        with anyio.fail_after(15):
            await changed.wait()
        after = {t.name for t in (await client.list_tools()).tools}
        (fresh,) = after - before
        return {
            "list_changed": capabilities.tools is not None and capabilities.tools.list_changed,
            "fresh": (await client.call_tool(fresh, {})).content[0].text,  # type: ignore[union-attr]
            "echo": (await client.call_tool(echo, {"text": "still"})).content[0].text,  # type: ignore[union-attr]
            "kept": before <= after,
        }


@pytest.mark.parametrize("upstream_era", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_upstream_tool_list_change_reaches_the_served_client(
    tmp_path: Path, transport: str, upstream_era: str
) -> None:
    args = serve_args(tmp_path, upstream_era)
    if transport == "stdio":
        served = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())
        outcome = anyio.run(add_a_tool_upstream, served)
    else:
        with http_server(args) as url:
            outcome = anyio.run(add_a_tool_upstream, url)
    assert outcome == {"list_changed": True, "fresh": "fresh ok", "echo": "demo:still", "kept": True}


def test_a_change_is_told_only_to_the_connections_of_the_users_it_concerns() -> None:
    """A user's own server changing reaches that user's connections only; a shared server's
    reaches everyone's; a connection that is gone is forgotten, not written to."""
    import asyncio
    import gc
    from types import SimpleNamespace

    from toolroute.serve.list_changes import EVERYONE, ListWatchers

    told: list[str] = []

    class Connection:
        def __init__(self, name: str) -> None:
            self.name = name

        async def send_tool_list_changed(self) -> None:
            told.append(self.name)

    async def go() -> list[list[str]]:
        watchers = ListWatchers()
        alice, bob, gone = Connection("alice"), Connection("bob"), Connection("gone")
        for user, connection in (("alice", alice), ("bob", bob), ("bob", gone)):
            watchers.seen(user, SimpleNamespace(session=SimpleNamespace(_connection=connection)))
        del gone, connection  # the loop's name held the last one too
        gc.collect()
        rounds = []
        for audience in ("alice", EVERYONE, "carol"):
            told.clear()
            await asyncio.to_thread(watchers.changed, audience)  # from another thread, as the gateway does
            for _ in range(20):
                await asyncio.sleep(0.01)
            rounds.append(sorted(told))
        return rounds

    assert asyncio.run(go()) == [["alice"], ["alice", "bob"], []]


def test_users_whose_connections_are_all_gone_are_dropped() -> None:
    """The map of connections keeps a set per user only while one of theirs is open."""
    import asyncio
    import gc
    from types import SimpleNamespace

    from toolroute.serve.list_changes import ListWatchers

    class Connection:
        async def send_tool_list_changed(self) -> None:
            pass

    watchers = ListWatchers()
    kept = Connection()
    gone = [Connection() for _ in range(50)]

    async def list_all(seen: list[tuple[str, Connection]]) -> None:  # a tools/list each, on the serving loop
        for user, connection in seen:
            watchers.seen(user, SimpleNamespace(session=SimpleNamespace(_connection=connection)))

    asyncio.run(list_all([(f"u{n}", c) for n, c in enumerate(gone)] + [("u0", kept)]))
    assert watchers.prune() == 0 and watchers.users() == 50  # every user has one open
    del gone
    gc.collect()
    assert watchers.prune() == 49 and watchers.users() == 1  # u0 still has `kept`
    del kept
    gc.collect()
    assert watchers.prune() == 1 and watchers.users() == 0
