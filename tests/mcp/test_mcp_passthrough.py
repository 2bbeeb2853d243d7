"""A faithful gateway (issue 43): what real MCP servers offer reaches a client through `toolroute
serve` as it reaches the same client connected straight to them.

Five third-party servers from PyPI (mcp-server-time, mcp-server-git, mcp-server-fetch,
excel-mcp-server, markitdown-mcp) and the SDK-built demo server (prompts, resources, templates,
instructions, mixed content), each started over stdio, offline (fetch reads a page from a server
on 127.0.0.1). The SDK's own `ClientSession` sees each server directly, and all of them through
one `toolroute serve` over stdio and over streamable HTTP: every field of every tool, the
prompts and what `prompts/get` answers, the resources, the templates and what `resources/read`
answers, and the results of real calls (every block, structured content, the error flag and the
server's own error text) are identical. The documented changes: a tool name that is not a
legal function name is sanitised (`text.shout` -> `text_shout`), and every tool may be called as a
task (`execution.taskSupport: optional`: the gateway runs tasks itself, serve/tasks.py).
Instructions pass unchanged from one server, and joined under each server's id from several.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import demo_stdio
from _serve_helpers import served_http, tool_env, toolroute_exe
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolroute.naming import sanitize_tool_name

BIN = Path(sys.executable).parent
EXCEL_ROWS = [["name", "qty"], ["apples", 3], ["pears", 5]]


def _git_repo(where: Path) -> Path:
    repo = where / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True, env={"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z"})
    (repo / "a.txt").write_text("one\ntwo\n")
    return repo


def _workbook(where: Path) -> Path:
    from openpyxl import Workbook

    path = where / "fruit.xlsx"
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sheet1"
    for row in EXCEL_ROWS:
        sheet.append(row)
    book.save(path)
    return path


@contextlib.contextmanager
def _page_server(root: Path) -> Iterator[str]:
    page = "<html><head><title>Fruit</title></head><body><h1>Fruit</h1><p>Apples.</p></body></html>"
    (root / "page.html").write_text(page)
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page.html"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def _servers(tmp: Path, repo: Path) -> dict[str, dict[str, Any]]:
    demo = demo_stdio("demo")
    demo["args"] = [*demo["args"], "--offers"]
    return {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
        "fetch": {
            "command": sys.executable,
            "args": ["-m", "mcp_server_fetch", "--ignore-robots-txt", "--allow-private-ips"],
            # No node on its PATH: readabilipy would otherwise try to install Readability.js
            # from npm (the network) and stall; its pure-Python mode is offline.
            "env": {"PATH": "/nonexistent"},
        },
        "excel": {"command": str(BIN / "excel-mcp-server"), "args": ["stdio", "--allow-dir", str(tmp)]},
        "markitdown": {"command": str(BIN / "markitdown-mcp"), "args": []},
        "demo": demo,
    }


def _calls(tmp: Path, repo: Path, workbook: Path, page: str) -> list[tuple[str, dict[str, Any]]]:
    """Real calls, each server's successes and errors, that answer the same every time."""
    (tmp / "doc.html").write_text("<h1>Doc</h1><ul><li>one</li><li>two</li></ul>")
    return [
        ("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ("get_current_time", {"timezone": "Nowhere/Bogus"}),
        ("git_status", {"repo_path": str(repo)}),
        ("git_diff_unstaged", {"repo_path": str(repo)}),
        ("git_show", {"repo_path": str(repo), "revision": "no-such-revision"}),
        ("fetch", {"url": page}),
        ("read_range", {"path": str(workbook), "sheet": "Sheet1"}),
        ("describe_workbook", {"path": str(workbook)}),
        ("read_range", {"path": str(tmp / "missing.xlsx"), "sheet": "Sheet1"}),
        ("convert_to_markdown", {"uri": (tmp / "doc.html").as_uri()}),
        ("media", {}),
        ("two_blocks", {}),
        ("add", {"a": 2, "b": 3}),
        ("fail", {"message": "the server's own words"}),
    ]


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def _surface(
    session: ClientSession, calls: list[tuple[str, dict[str, Any]]], prompts: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """Everything a client sees of the servers: lists, and the answers to real requests."""
    tools = (await session.list_tools()).tools
    listed_prompts = (await session.list_prompts()).prompts
    resources = (await session.list_resources()).resources
    templates = (await session.list_resource_templates()).resource_templates
    names = {sanitize_tool_name(t.name): t.name for t in tools}
    surface: dict[str, Any] = {
        # Keyed by the sanitised name: the one change toolroute makes (documented).
        "tools": {sanitize_tool_name(t.name): {**_dump(t), "name": None} for t in tools},
        "prompts": [_dump(p) for p in listed_prompts],
        "resources": [_dump(r) for r in resources],
        "templates": [_dump(t) for t in templates],
        "calls": [],
        "prompt answers": {},
        "reads": {},
    }
    for tool, arguments in calls:
        result = await session.call_tool(names.get(tool, tool), arguments)
        surface["calls"].append((tool, _dump(result)))
    for name, arguments in prompts.items():
        surface["prompt answers"][name] = _dump(await session.get_prompt(name, arguments))
    expanded = [re.sub(r"\{[^}]*\}", "gamma", t.uri_template) for t in templates]
    for uri in [str(r.uri) for r in resources] + expanded:
        surface["reads"][uri] = _dump(await session.read_resource(uri))
    return surface


@contextlib.asynccontextmanager
async def _stdio_session(command: str, args: list[str], env: dict[str, str] | None = None) -> AsyncIterator[Any]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with (
        stdio_client(params, errlog=subprocess.DEVNULL) as (read, write),  # type: ignore[arg-type]
        ClientSession(read, write) as session,
    ):
        yield session, await session.initialize()


@contextlib.asynccontextmanager
async def _http_session(url: str) -> AsyncIterator[Any]:
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        yield session, await session.initialize()


async def _direct(
    servers: dict[str, dict[str, Any]], calls: list[tuple[str, dict[str, Any]]], prompts: dict[str, dict[str, str]]
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """What each server offers, seen directly, merged in the order the servers are named."""
    merged: dict[str, Any] = {"tools": {}, "prompts": [], "resources": [], "templates": [], "calls": []}
    merged |= {"prompt answers": {}, "reads": {}}
    instructions: dict[str, str | None] = {}
    for service, config in servers.items():
        async with _stdio_session(config["command"], config["args"], config.get("env")) as (session, init):
            instructions[service] = init.instructions
            tools = {t.name for t in (await session.list_tools()).tools}
            own = [i for i, (tool, _) in enumerate(calls) if tool in tools]
            own_calls = [calls[i] for i in own]
            listed = (await session.list_prompts()).prompts if init.capabilities.prompts else []
            own_prompts = {p.name for p in listed}
            if init.capabilities.resources:
                seen = await _surface(session, own_calls, {k: v for k, v in prompts.items() if k in own_prompts})
            else:
                seen = await _tools_only(session, own_calls, {k: v for k, v in prompts.items() if k in own_prompts})
        merged["tools"] |= seen["tools"]
        merged["calls"] += list(zip(own, seen["calls"], strict=True))
        for key in ("prompts", "resources", "templates"):
            merged[key] += seen[key]
        merged["prompt answers"] |= seen["prompt answers"]
        merged["reads"] |= seen["reads"]
    merged["calls"] = [call for _, call in sorted(merged["calls"], key=lambda indexed: indexed[0])]
    return merged, instructions


async def _tools_only(
    session: ClientSession, calls: list[tuple[str, dict[str, Any]]], prompts: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """`_surface` of a server without resources (asking for them would be refused)."""
    tools = (await session.list_tools()).tools
    listed = (await session.list_prompts()).prompts if prompts else []
    surface: dict[str, Any] = {
        "tools": {sanitize_tool_name(t.name): {**_dump(t), "name": None} for t in tools},
        "prompts": [_dump(p) for p in listed],
        "resources": [],
        "templates": [],
        "calls": [],
        "prompt answers": {},
        "reads": {},
    }
    for tool, arguments in calls:
        surface["calls"].append((tool, _dump(await session.call_tool(tool, arguments))))
    for name, arguments in prompts.items():
        surface["prompt answers"][name] = _dump(await session.get_prompt(name, arguments))
    return surface


def _serve_args(config: Path, servers: dict[str, Any]) -> list[str]:
    return ["--mcp-config", str(config), "--mcp-servers", ",".join(servers)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("passthrough")
    repo = _git_repo(tmp)
    workbook = _workbook(tmp)
    with _page_server(tmp) as page:
        servers = _servers(tmp, repo)
        config = tmp / "servers.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        prompts = {"fetch": {"url": page}, "summary": {"topic": "alpha", "tone": "dry"}, "echo": {"text": "hi"}}
        calls = _calls(tmp, repo, workbook, page)
        direct, instructions = anyio.run(_direct, servers, calls, prompts)
        yield {
            "tmp": tmp,
            "config": config,
            "servers": servers,
            "calls": calls,
            "prompts": prompts,
            "direct": direct,
            "instructions": instructions,
        }


def _as_task_too(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the gateway lists it: callable as a task, which it runs (none of these servers
    requires one)."""
    assert (tool.get("execution") or {}).get("taskSupport") != "required"
    return {**tool, "execution": {**(tool.get("execution") or {}), "taskSupport": "optional"}}


def _assert_same(direct: dict[str, Any], served: dict[str, Any]) -> None:
    # The servers really offer each of these, so the comparison means something.
    assert len(direct["tools"]) >= 60 and direct["prompts"] and direct["resources"] and direct["templates"]
    assert any(call[1].get("isError") for call in direct["calls"])
    assert any(call[1].get("structuredContent") for call in direct["calls"])
    assert sorted(served["tools"]) == sorted(direct["tools"])
    for name, tool in direct["tools"].items():
        assert served["tools"][name] == _as_task_too(tool), name
    for key in ("prompts", "resources", "templates", "prompt answers", "reads"):
        assert served[key] == direct[key], key
    assert [c[0] for c in served["calls"]] == [c[0] for c in direct["calls"]]  # each call reached its server
    for (tool, ours), (_, theirs) in zip(served["calls"], direct["calls"], strict=True):
        assert ours == theirs, tool


def test_every_server_through_serve_over_stdio_is_what_it_is_directly(world: dict[str, Any]) -> None:
    async def seen() -> tuple[dict[str, Any], str | None]:
        args = ["serve", *_serve_args(world["config"], world["servers"])]
        async with _stdio_session(toolroute_exe(), args, tool_env()) as (session, init):
            return await _surface(session, world["calls"], world["prompts"]), init.instructions

    served, instructions = anyio.run(seen)
    _assert_same(world["direct"], served)
    # Several servers' instructions: each one's, whole, under its id.
    given = {k: v for k, v in world["instructions"].items() if v}
    assert set(given) >= {"excel", "demo"}
    assert instructions == "\n\n".join(f"[{service}]\n{text}" for service, text in given.items())


def test_every_server_through_serve_over_http_is_what_it_is_directly(world: dict[str, Any]) -> None:
    with served_http(_serve_args(world["config"], world["servers"])) as server:

        async def seen() -> tuple[dict[str, Any], str | None]:
            async with _http_session(server.url) as (session, init):
                return await _surface(session, world["calls"], world["prompts"]), init.instructions

        served, instructions = anyio.run(seen)
    _assert_same(world["direct"], served)
    given = {k: v for k, v in world["instructions"].items() if v}
    assert instructions == "\n\n".join(f"[{service}]\n{text}" for service, text in given.items())


@pytest.mark.parametrize("service", ["excel", "demo"])
def test_one_servers_instructions_pass_unchanged(world: dict[str, Any], service: str) -> None:
    async def seen() -> str | None:
        args = ["serve", "--mcp-config", str(world["config"]), "--mcp-servers", service]
        async with _stdio_session(toolroute_exe(), args, tool_env()) as (_, init):
            return init.instructions

    assert world["instructions"][service]
    assert anyio.run(seen) == world["instructions"][service]
