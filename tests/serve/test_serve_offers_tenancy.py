"""Prompts and resources under served mode's tenancy (issue 43): two users each have their own
upstream server (real MCP servers over HTTP on 127.0.0.1, each answering with its own name) under
the same id; through one `toolroute serve` with API keys, each user lists, gets and reads only
their own server's prompts and resources, an unknown prompt or URI is an error, and every
`prompts/get` and `resources/read` leaves one audit line under its user. The registry lives
outside /tmp, as deployed."""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from typing import Any

import anyio
import pytest
from _mcp_helpers import http_server
from _serve_helpers import TOOLS_MODULE, outside_tmp, served_http
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from toolroute.serve.store import UserStore


async def _offers(url: str, key: str) -> dict[str, Any]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        seen: dict[str, Any] = {
            "prompts": sorted(p.name for p in (await client.list_prompts()).prompts),
            "resources": sorted(str(r.uri) for r in (await client.list_resources()).resources),
            "prompt": (await client.get_prompt("echo", {"text": "x"})).messages[0].content.text,  # type: ignore[union-attr]
            "index": (await client.read_resource("notes://index")).contents[0].text,  # type: ignore[union-attr]
            "template": (await client.read_resource("notes://gamma")).contents[0].text,  # type: ignore[union-attr]
        }
        for bad in (lambda: client.get_prompt("nope", {}), lambda: client.read_resource("other://x")):
            with pytest.raises(MCPError):
                await bad()
        return seen


def test_each_user_gets_and_reads_only_their_own_servers_offers() -> None:
    folder = outside_tmp()
    try:
        with ExitStack() as stack:
            servers = {
                user: stack.enter_context(http_server(f"{user}-notes", flags=("--offers",)))
                for user in ("alice", "bob")
            }
            dsn = f"sqlite:///{folder / 'users.db'}"
            keys = {}
            with UserStore(dsn) as store:
                for user, server in servers.items():
                    store.add_user(user)
                    keys[user] = store.add_key(user)
                    store.add_server(user, "notes", {"url": server.url})
            audit = folder / "audit.jsonl"
            args = ["--modules", TOOLS_MODULE, "--functions", "echo", "--api-keys", "--store", dsn]
            url = stack.enter_context(served_http([*args, "--audit-log", str(audit)])).url
            for user in ("alice", "bob", "alice"):
                seen = anyio.run(_offers, url, keys[user])
                assert seen["prompts"] == ["echo", "summary"] and seen["resources"] == [
                    "data://logo.png",
                    "notes://index",
                ]
                assert seen["prompt"] == f"{user}-notes says x"
                assert seen["index"] == f"{user}-notes: alpha, beta"
                assert seen["template"] == f"{user}-notes notes on gamma"
        records = [json.loads(line) for line in audit.read_text().splitlines()]
        offered = [
            (r["user"], r["level"], r["tool"], r["outcome"]) for r in records if r["level"] in ("prompt", "resource")
        ]
        assert offered.count(("alice", "prompt", "echo", "ok")) == 2
        assert offered.count(("bob", "resource", "notes://gamma", "ok")) == 1
        assert ("bob", "prompt", "nope", "error") in offered and ("alice", "resource", "other://x", "error") in offered
    finally:
        shutil.rmtree(folder, ignore_errors=True)
