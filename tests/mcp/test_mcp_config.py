"""The `mcpServers` configuration format: stdio, streamable HTTP and SSE entries, from a dict or a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolroute.errors import ToolNotFoundError, ToolRegistrationError
from toolroute.mcp import McpGateway, parse_config, parse_server
from toolroute.mcp.config import load_config_file


def test_stdio_entry_keeps_command_args_env_cwd(tmp_path: Path) -> None:
    cfg = parse_server("fs", {"command": "npx", "args": ["-y", "server"], "env": {"A": 1}, "cwd": tmp_path})
    assert cfg.transport == "stdio"
    assert (cfg.command, cfg.args, dict(cfg.env), cfg.cwd) == ("npx", ("-y", "server"), {"A": "1"}, str(tmp_path))


@pytest.mark.parametrize(
    ("entry", "transport"),
    [
        ({"url": "http://127.0.0.1:1/mcp"}, "http"),
        ({"url": "http://127.0.0.1:1/mcp", "type": "streamable-http"}, "http"),
        ({"url": "http://127.0.0.1:1/mcp", "transport": "http"}, "http"),
        ({"url": "http://127.0.0.1:1/sse"}, "sse"),
        ({"url": "http://127.0.0.1:1/events", "type": "sse"}, "sse"),
    ],
)
def test_url_entries_pick_the_transport(entry: dict[str, str], transport: str) -> None:
    assert parse_server("web", entry).transport == transport


def test_headers_and_timeout_are_kept() -> None:
    entry = {"url": "https://x.test/mcp", "headers": {"Authorization": "Bearer t"}, "timeout": 2, "connectTimeout": 5}
    cfg = parse_server("web", entry)
    assert dict(cfg.headers) == {"Authorization": "Bearer t"}
    assert (cfg.timeout, cfg.connect_timeout) == (2.0, 5.0)


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({}, "needs 'command'"),
        ({"command": ""}, "non-empty"),
        ({"command": "x", "type": "sse"}, "means stdio"),
        ({"url": "ftp://x"}, "http(s) URL"),
        ({"url": "http://x", "type": "websocket"}, "unknown transport"),
        ({"command": "x", "timeout": 0}, "positive"),
        ({"command": "x", "args": "not-a-list"}, "list of strings"),
        ({"command": "x", "env": ["A"]}, "object of strings"),
        ({"command": "x", "comand": "typo"}, "unknown key"),
    ],
)
def test_bad_entries_are_refused_clearly(entry: dict[str, object], needle: str) -> None:
    with pytest.raises(ToolRegistrationError, match="'svc'") as info:
        parse_server("svc", entry)
    assert needle in str(info.value)


def test_wrapped_and_bare_forms_and_disabled_servers() -> None:
    servers = {"a": {"command": "x"}, "b": {"command": "y", "disabled": True}}
    assert sorted(parse_config({"mcpServers": servers})) == ["a"]
    assert sorted(parse_config(servers)) == ["a"]
    assert parse_config(None) == {}


def test_from_file_reads_claude_desktop_json(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "python", "args": ["-m", "mcp_server_time"]}}}))
    assert load_config_file(path)["time"].args == ("-m", "mcp_server_time")
    with McpGateway.from_file(path) as gw:  # lazy: nothing starts until first use
        assert gw.has_service("time")
        assert not gw.has_service("other")
        with pytest.raises(ToolNotFoundError, match="no such global MCP service"):
            gw.get_global_mcp_tools(["other"])


def test_unreadable_file_is_a_registration_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ToolRegistrationError, match="cannot read MCP configuration"):
        McpGateway.from_file(tmp_path / "bad.json")


def test_duplicate_and_user_form_global_ids_are_refused() -> None:
    with McpGateway({"a": {"command": "x"}}) as gw:
        with pytest.raises(ToolRegistrationError, match="already registered"):
            gw.add_server("a", {"command": "y"})
        with pytest.raises(ToolRegistrationError, match="per-user form"):
            gw.add_server("user_1_service_a", {"command": "y"})
        gw.add_user_server("u1", "a", {"command": "y"})  # same id per user is fine: isolated by key
        assert gw.has_service("a", "u1")


def test_the_gateway_implements_the_routers_gateway_protocol() -> None:
    from _core_helpers import DictGateway

    from toolroute.routes import ToolGateway

    assert isinstance(DictGateway({}, {}), ToolGateway)  # the tests' stand-in keeps the same contract
    with McpGateway() as gw:
        assert isinstance(gw, ToolGateway)
        assert gw.get_global_mcp_tools([]) == []
        assert gw.refresh() is False  # nothing configured: nothing changed
