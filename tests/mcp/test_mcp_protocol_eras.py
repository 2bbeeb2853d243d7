"""Which MCP era the gateway speaks upstream (issue 23, part 2; the default, issue 43): `protocol:
negotiate | legacy | 2026-07-28 | auto` per server. Real servers over stdio: the SDK's own
`MCPServer` (both eras), and servers on bare JSON-RPC that speak one era only
(`one_era_server.py`: a legacy server that never answers `server/discover`, a modern one that
refuses `initialize`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _mcp_helpers import SERVERS, demo_stdio, http_server

from toolroute import ToolRouter
from toolroute.errors import ToolError, ToolRegistrationError
from toolroute.mcp import connection
from toolroute.mcp.config import parse_server
from toolroute.mcp.gateway import McpGateway


def one_era(era: str, log: Path, **options: Any) -> dict[str, Any]:
    script = str(SERVERS / "one_era_server.py")
    return {"command": sys.executable, "args": [script, "--era", era, "--log", str(log)], **options}


def era_of(gateway: McpGateway, service: str) -> str | None:
    return gateway._services[service].connection.era


@pytest.fixture(autouse=True)
def _forget_eras() -> None:
    connection._ERAS.clear()  # each test starts as a fresh process would


ERAS = [("negotiate", "legacy"), ("legacy", "legacy"), ("2026-07-28", "2026-07-28"), ("auto", "2026-07-28")]


@pytest.mark.parametrize(("protocol", "era"), ERAS)
def test_the_sdk_server_is_spoken_to_in_the_era_asked_for(protocol: str, era: str) -> None:
    with McpGateway({"mcpServers": {"demo": demo_stdio("demo", protocol=protocol)}}) as gateway:
        router = ToolRouter(gateway=gateway)
        assert router.execute("echo", {"text": "hi"}).text == "demo:hi"
        assert era_of(gateway, "demo") == era


@pytest.mark.parametrize(("protocol", "era"), ERAS)
def test_the_sdk_server_over_http_is_spoken_to_in_the_era_asked_for(protocol: str, era: str) -> None:
    with (
        http_server("web") as server,
        McpGateway({"mcpServers": {"web": {"url": server.url, "protocol": protocol}}}) as gateway,
    ):
        router = ToolRouter(gateway=gateway)
        assert router.execute("echo", {"text": "hi"}).text == "web:hi"
        assert router.execute("add", {"a": 2, "b": 3}).text == "5"
        assert era_of(gateway, "web") == era


def test_a_modern_only_server_is_reached_by_default_and_with_2026_07_28_and_auto_but_not_legacy(
    tmp_path: Path,
) -> None:
    log = tmp_path / "modern.log"
    for options in ({}, {"protocol": "negotiate"}, {"protocol": "2026-07-28"}, {"protocol": "auto"}):
        connection._ERAS.clear()
        with McpGateway({"mcpServers": {"m": one_era("modern", log, **options)}}) as gateway:
            assert ToolRouter(gateway=gateway).execute("echo", {"text": "x"}).text == "modern:x"
            assert era_of(gateway, "m") == "2026-07-28"
    with McpGateway({"mcpServers": {"m": one_era("modern", log, protocol="legacy")}}) as gateway:
        with pytest.raises(ToolError, match="not found"):
            ToolRouter(gateway=gateway).execute("echo", {"text": "x"})
        assert 'speaks only the 2026-07-28 revision: set "protocol"' in gateway.errors()["m"]


def test_auto_probes_a_silent_legacy_server_once_then_remembers(tmp_path: Path) -> None:
    """The first connect waits a bounded time for `server/discover`, then shakes hands; a
    reconnect (the server crashed) and a second gateway in the process go straight to the
    handshake: no second wait."""
    log = tmp_path / "legacy.log"
    config = {"mcpServers": {"old": one_era("legacy", log, protocol="auto")}}
    with McpGateway(config) as gateway:
        router = ToolRouter(gateway=gateway)
        started = time.monotonic()
        assert router.execute("echo", {"text": "a"}).text == "legacy:a"
        first = time.monotonic() - started
        assert era_of(gateway, "old") == "legacy"
        with pytest.raises(ToolError):
            router.execute("crash", {})
        started = time.monotonic()
        assert router.execute("echo", {"text": "b"}).text == "legacy:b"  # restarted, reconnected
        again = time.monotonic() - started
    with McpGateway(config) as gateway:
        assert ToolRouter(gateway=gateway).execute("echo", {"text": "c"}).text == "legacy:c"
    methods = log.read_text().split()
    assert methods.count("server/discover") == 1, methods
    assert methods.count("initialize") == 3, methods
    # Structure, not speed: the probe's bound was paid once, the later connects skipped it.
    assert first >= connection.PROBE_TIMEOUT * 0.9 > again


def test_an_unknown_protocol_is_refused_at_configuration() -> None:
    with pytest.raises(ToolRegistrationError, match="'protocol' must be one of negotiate, legacy, 2026-07-28, auto"):
        parse_server("x", {"command": "true", "protocol": "2027"})


def test_the_default_never_probes_a_legacy_server_and_upgrades_only_on_the_servers_word(tmp_path: Path) -> None:
    """No `server/discover` is sent to a server that shook hands (a silent legacy server would
    stall a probe); a modern-only server's own -32022 is the evidence, taken once and remembered:
    the reconnect after a crash goes straight to `server/discover`."""
    old_log, new_log = tmp_path / "legacy.log", tmp_path / "modern.log"
    with McpGateway({"mcpServers": {"old": one_era("legacy", old_log)}}) as gateway:
        assert ToolRouter(gateway=gateway).execute("echo", {"text": "a"}).text == "legacy:a"
        assert era_of(gateway, "old") == "legacy"
    assert "server/discover" not in old_log.read_text().split()
    with McpGateway({"mcpServers": {"new": one_era("modern", new_log)}}) as gateway:
        router = ToolRouter(gateway=gateway)
        assert router.execute("echo", {"text": "b"}).text == "modern:b"
        with pytest.raises(ToolError):
            router.execute("crash", {})
        assert router.execute("echo", {"text": "c"}).text == "modern:c"  # restarted, reconnected
        assert era_of(gateway, "new") == "2026-07-28"
    methods = new_log.read_text().split()
    assert methods.count("initialize") == 1 and methods.count("server/discover") == 2, methods
