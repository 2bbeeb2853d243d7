"""A hostile upstream behind `toolroute serve` (issue 55): one tenant's calls to a server that
replies with invalid UTF-8, JSON nested 100,000 deep, not JSON at all, or a storm of 20,000
`notifications/tools/list_changed`, fail at once with the reason (or, for the storm, succeed) while
another tenant's calls are answered; the server's log stays a few lines. A real `toolroute serve
--api-keys` over HTTP on 127.0.0.1 with the raw server (`tests/mcp_servers/raw_server.py`) over
stdio upstream, and the SDK's client. Nothing is timed: the upstream call timeout is long, so a
call left waiting would show as a timeout error.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import anyio
import pytest
from _mcp_helpers import demo_stdio, script_stdio
from _serve_helpers import outside_tmp, served_http, tool_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.store import UserStore


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[list[str], str, str]]:
    """Server arguments with the raw and demo servers upstream, and two tenants' keys."""
    base = outside_tmp()
    try:
        with UserStore(f"sqlite:///{base / 'users.db'}") as store:
            store.add_user("mallory")
            store.add_user("alice")
            keys = store.add_key("mallory"), store.add_key("alice")
        servers = {"raw": {**script_stdio("raw_server.py"), "timeout": 120}, "ok": demo_stdio("ok")}
        (base / "servers.json").write_text(json.dumps({"mcpServers": servers}))
        args = [
            *("--mcp-config", str(base / "servers.json"), "--mcp-servers", "raw,ok"),
            *("--api-keys", "--store", f"sqlite:///{base / 'users.db'}", "--recycle-above", "0"),
        ]
        yield args, *keys
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def _calls(url: str, key: str, calls: list[tuple[str, dict[str, object]]]) -> list[tuple[bool, str]]:
    """Each call by the suffix of its tool's name: (is_error, text)."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}, timeout=180)
    out = []
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        for suffix, arguments in calls:
            (name,) = [n for n in names if n.endswith(suffix)]
            result = await client.call_tool(name, arguments)
            out.append((result.is_error, "".join(getattr(c, "text", "") for c in result.content)))
    return out


def test_a_hostile_upstream_fails_its_calls_at_once_and_other_tenants_are_served(
    deployment: tuple[list[str], str, str],
) -> None:
    args, mallory, alice = deployment
    with served_http(args, tool_env()) as served:
        hostile = anyio.run(
            _calls,
            served.url,
            mallory,
            [("badutf8", {}), ("deep", {}), ("notjson", {}), ("storm", {}), ("say", {"text": "still"})],
        )
        answered = anyio.run(_calls, served.url, alice, [("add", {"a": 20, "b": 22}), ("say", {"text": "hi"})])
        log = served.drain()
    reasons = ["not valid UTF-8", "nested deeper", "not JSON"]
    for (is_error, text), reason in zip(hostile[:3], reasons, strict=True):
        assert is_error and reason in text, text
        assert "did not answer" not in text  # not the call's timeout
    assert hostile[3:] == [(False, "stormed"), (False, "raw:still")]
    assert answered == [(False, "42"), (False, "raw:hi")]
    # 20,000 notifications and three refused replies: a few lines, not thousands.
    assert len(log.splitlines()) < 40, log[-4000:]
