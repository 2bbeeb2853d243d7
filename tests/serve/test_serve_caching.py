"""Caching hints (2026-07-28 `ttlMs` / `cacheScope`) through `toolroute serve` (issue 60): an
upstream's hints reach a 2026-07-28 client where the listing is that upstream's and every caller
sees the same; several upstreams' listings are as fresh as the least fresh, public only if all
are; toolroute's own tools, a handshake-era upstream and a per-user view (served mode) are never
shared. Real processes: the SDK's `MCPServer` with hints, the SDK's client, `toolroute serve`."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import SERVERS
from _serve_helpers import alice_and_bob_served, http_server, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CACHING = str(SERVERS / "caching_server.py")
Hints = tuple[int, str] | None  # what a listing said on the wire: (ttlMs, cacheScope), or nothing


def upstream(ttl: int = 45000, scope: str = "public", era: str = "2026-07-28") -> dict[str, Any]:
    return {"command": sys.executable, "args": [CACHING, "--ttl", str(ttl), "--scope", scope], "protocol": era}


def config(tmp_path: Path, servers: dict[str, Any], *extra: str) -> list[str]:
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": servers}))
    return ["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", ",".join(servers), *extra]


def hints_of(result: Any) -> Hints:
    # Only what came on the wire: the SDK's model defaults (0, private) are not hints.
    return (result.ttl_ms, result.cache_scope) if "ttl_ms" in result.model_fields_set else None


async def listings(target: Any, mode: str) -> dict[str, Hints]:
    async with Client(target, mode=mode) as client:
        return {
            "tools": hints_of(await client.list_tools()),
            "prompts": hints_of(await client.list_prompts()),
            "resources": hints_of(await client.list_resources()),
            "read": hints_of(await client.read_resource("note://one")),
        }


def served(args: list[str], transport: str, mode: str) -> dict[str, Hints]:
    if transport == "stdio":
        params = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())
        return anyio.run(listings, params, mode)
    with http_server(args) as url:
        return anyio.run(listings, url, mode)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_one_upstreams_hints_reach_a_modern_client_as_directly(tmp_path: Path, transport: str) -> None:
    direct = StdioServerParameters(command=sys.executable, args=[CACHING, "--ttl", "45000", "--scope", "public"])
    theirs = anyio.run(listings, direct, "auto")
    assert theirs == dict.fromkeys(("tools", "prompts", "resources", "read"), (45000, "public"))
    assert served(config(tmp_path, {"cached": upstream()}), transport, "auto") == theirs
    # A handshake-era client gets no hints, directly or not (its revision has none).
    legacy = anyio.run(listings, direct, "legacy")
    assert legacy == dict.fromkeys(("tools", "prompts", "resources", "read"))
    assert served(config(tmp_path, {"cached": upstream()}), transport, "legacy") == legacy


def test_several_upstreams_are_as_fresh_as_the_least_fresh(tmp_path: Path) -> None:
    both_public = {"a": upstream(45000, "public"), "b": upstream(20000, "public")}
    assert served(config(tmp_path, both_public), "stdio", "auto")["tools"] == (20000, "public")
    one_private = {"a": upstream(45000, "public"), "b": upstream(60000, "private")}
    got = served(config(tmp_path, one_private), "stdio", "auto")
    assert {k: got[k] for k in ("tools", "prompts", "resources")} == dict.fromkeys(
        ("tools", "prompts", "resources"), (45000, "private")
    )
    assert got["read"] == (45000, "public")  # read from one server (the first that lists it): its own


def test_a_handshake_era_upstream_promises_nothing(tmp_path: Path) -> None:
    """The same server reached in the handshake era sends no hints: the gateway claims none."""
    got = served(config(tmp_path, {"cached": upstream(era="legacy")}), "stdio", "auto")
    assert got == dict.fromkeys(("tools", "prompts", "resources", "read"), (0, "private"))


def test_toolroute_own_tools_make_the_listing_immediately_stale(tmp_path: Path) -> None:
    """A listing with a tool of toolroute's own (a built-in) is toolroute's: its live config and
    policy promise nothing, whatever the upstream says; the upstream's prompts keep its hints."""
    args = config(tmp_path, {"cached": upstream()}, "--functions", "read_file", "--workspace", str(tmp_path))
    got = served(args, "stdio", "auto")
    assert got["tools"] == (0, "private")
    assert {k: got[k] for k in ("prompts", "resources", "read")} == dict.fromkeys(
        ("prompts", "resources", "read"), (45000, "public")
    )


def two_tenants(entry: dict[str, Any]) -> contextlib.AbstractContextManager[tuple[str, dict[str, str]]]:
    """`toolroute serve` with API keys for alice and bob (served mode), one shared upstream."""
    return alice_and_bob_served(lambda folder: config(folder, {"cached": entry}))


async def tenant_listings(url: str, key: str) -> dict[str, Hints]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http:
        return await listings(streamable_http_client(url, http_client=http), "auto")


def test_a_users_own_view_is_never_shared() -> None:
    """Served mode: each user's listing is their own (policy, own servers), so an upstream's
    `public` reaches them as `private`, with its time to live."""
    with two_tenants(upstream()) as (url, keys):
        for user in ("alice", "bob"):
            got = anyio.run(tenant_listings, url, keys[user])
            assert got == dict.fromkeys(("tools", "prompts", "resources", "read"), (45000, "private")), user
