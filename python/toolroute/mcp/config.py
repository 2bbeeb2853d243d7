"""The `mcpServers` configuration format that MCP clients already use (Claude Desktop, Cursor...).

    {"mcpServers": {
        "time": {"command": "python", "args": ["-m", "mcp_server_time"], "env": {...}, "cwd": "..."},
        "docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}},
        "old":  {"url": "http://127.0.0.1:8001/sse", "type": "sse"}}}

A server with `command` is stdio; one with `url` is streamable HTTP unless `type`/`transport` says
`sse` (or the URL path ends in `/sse`). Optional per server: `timeout` (seconds per call),
`connectTimeout` (seconds for start-up and handshake), `disabled: true` (skipped entirely),
`trustAnnotations: true` (its tools' `readOnlyHint`/`idempotentHint` count for scheduling: a
read-only tool may run in a parallel batch; otherwise they are forwarded but not relied on),
`protocol` (which MCP era to speak: `negotiate`, the default, as the SDK's own client does:
the `initialize` handshake every server of the 2025 revisions answers, and the stateless
2026-07-28 revision when the server's own rejection of the handshake names it; `legacy`, the
handshake only; `2026-07-28`, the stateless revision only; `auto`, probe `server/discover` once,
briefly, and remember the answer: see `connection.py`); `maxTools` and `maxListingBytes` (a
tool listing past either is refused and the server left out: 10,000 tools, 8 MiB by default);
`oauth` (an HTTP server each user authorizes with their own account, per the MCP authorization
specification: `{}`, or `{"clientId": ..., "clientSecret": ..., "scope": ...}` for a client the
operator registered; docs/deploy.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from toolroute.errors import ToolRegistrationError
from toolroute.naming import service_id_problem

Transport = Literal["stdio", "http", "sse"]
Protocol = Literal["negotiate", "legacy", "2026-07-28", "auto"]
PROTOCOLS: tuple[Protocol, ...] = ("negotiate", "legacy", "2026-07-28", "auto")

_HTTP_NAMES = {"http", "streamable-http", "streamable_http", "streamablehttp"}
_KNOWN_KEYS = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "transport",
    "timeout",
    "disabled",
    "description",
    "connectTimeout",
    "trustAnnotations",
    "protocol",
    "maxTools",
    "oauth",
    "maxListingBytes",
}


@dataclass(frozen=True)
class ServerConfig:
    """One upstream server, validated."""

    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    connect_timeout: float | None = None
    disabled: bool = False
    trust_annotations: bool = False
    protocol: Protocol = "negotiate"
    max_tools: int | None = None  # None: connection.MAX_TOOLS
    max_listing_bytes: int | None = None  # None: connection.MAX_LISTING_BYTES
    # The user authorizes the gateway with OAuth (served mode: `serve/upstream_oauth/`): a
    # pre-registered client (`clientId`, `clientSecret`), the `scope` asked for; {} for neither.
    oauth: Mapping[str, str] | None = None

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args]).strip()
        return f"{self.transport} {self.url}"


def _string_map(service_id: str, key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ToolRegistrationError(f"MCP server {service_id!r}: {key!r} must be an object of strings")
    return {k: str(v) for k, v in value.items()}


def _transport(service_id: str, raw: Mapping[str, Any]) -> Transport:
    declared = raw.get("type", raw.get("transport"))
    if "command" in raw:
        if declared not in (None, "stdio"):
            raise ToolRegistrationError(f"MCP server {service_id!r}: 'command' means stdio, but type is {declared!r}")
        return "stdio"
    if "url" not in raw:
        raise ToolRegistrationError(f"MCP server {service_id!r} needs 'command' (stdio) or 'url' (HTTP)")
    if declared is None:
        return "sse" if urlparse(str(raw["url"])).path.rstrip("/").endswith("/sse") else "http"
    name = str(declared).lower()
    if name == "sse":
        return "sse"
    if name in _HTTP_NAMES:
        return "http"
    raise ToolRegistrationError(f"MCP server {service_id!r}: unknown transport {declared!r} (stdio, http or sse)")


def _seconds(service_id: str, raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ToolRegistrationError(f"MCP server {service_id!r}: {key!r} must be a positive number of seconds")
    return float(value)


def _count(service_id: str, raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ToolRegistrationError(f"MCP server {service_id!r}: {key!r} must be a positive integer")
    return value


def parse_server(service_id: str, raw: Mapping[str, Any]) -> ServerConfig:
    problem = service_id_problem(service_id)
    if problem is not None:
        raise ToolRegistrationError(problem)
    if not isinstance(raw, Mapping):
        raise ToolRegistrationError(f"MCP server {service_id!r}: the configuration must be an object")
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    if unknown:
        raise ToolRegistrationError(f"MCP server {service_id!r}: unknown key(s) {', '.join(unknown)}")
    transport = _transport(service_id, raw)
    trust = raw.get("trustAnnotations", False)
    if not isinstance(trust, bool):
        raise ToolRegistrationError(f"MCP server {service_id!r}: 'trustAnnotations' must be true or false")
    protocol = raw.get("protocol", "negotiate")
    if protocol not in PROTOCOLS:
        raise ToolRegistrationError(
            f"MCP server {service_id!r}: 'protocol' must be one of {', '.join(PROTOCOLS)}, got {protocol!r}"
        )
    max_tools, max_listing_bytes = _count(service_id, raw, "maxTools"), _count(service_id, raw, "maxListingBytes")
    timeout = _seconds(service_id, raw, "timeout")
    connect_timeout = _seconds(service_id, raw, "connectTimeout")
    args = raw.get("args", ())
    if isinstance(args, str) or not all(isinstance(a, (str, int, float)) for a in args):
        raise ToolRegistrationError(f"MCP server {service_id!r}: 'args' must be a list of strings")
    if transport == "stdio":
        command = raw["command"]
        if not isinstance(command, str) or not command:
            raise ToolRegistrationError(f"MCP server {service_id!r}: 'command' must be a non-empty string")
        cwd = raw.get("cwd")
        return ServerConfig(
            transport="stdio",
            command=command,
            args=tuple(str(a) for a in args),
            env=_string_map(service_id, "env", raw.get("env")),
            cwd=os.fspath(cwd) if cwd is not None else None,
            timeout=timeout,
            connect_timeout=connect_timeout,
            disabled=bool(raw.get("disabled", False)),
            trust_annotations=trust,
            protocol=protocol,
            max_tools=max_tools,
            max_listing_bytes=max_listing_bytes,
        )
    url = raw["url"]
    if not isinstance(url, str) or urlparse(url).scheme not in ("http", "https"):
        raise ToolRegistrationError(f"MCP server {service_id!r}: 'url' must be an http(s) URL, got {url!r}")
    oauth = _oauth(service_id, raw.get("oauth"), transport)
    return ServerConfig(
        transport=transport,
        url=url,
        headers=_string_map(service_id, "headers", raw.get("headers")),
        timeout=timeout,
        connect_timeout=connect_timeout,
        disabled=bool(raw.get("disabled", False)),
        trust_annotations=trust,
        protocol=protocol,
        max_tools=max_tools,
        max_listing_bytes=max_listing_bytes,
        oauth=oauth,
    )


# `grant`: the registry's (upstream_oauth/); `tokenExchange` ("true"): RFC 8693 with the tenant's
# own JWT, at `tokenEndpoint` (else the discovered one), for `audience` if set.
OAUTH_KEYS = ("clientId", "clientSecret", "scope", "grant", "tokenExchange", "tokenEndpoint", "audience")


def _oauth(service_id: str, value: Any, transport: Transport) -> dict[str, str] | None:
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    oauth = _string_map(service_id, "oauth", value)
    unknown = sorted(set(oauth) - set(OAUTH_KEYS))
    if unknown:
        raise ToolRegistrationError(f"MCP server {service_id!r}: unknown 'oauth' key(s) {', '.join(unknown)}")
    if transport != "http":
        raise ToolRegistrationError(f"MCP server {service_id!r}: 'oauth' needs a streamable HTTP server")
    return oauth


def parse_config(config: Mapping[str, Any] | None) -> dict[str, ServerConfig]:
    """`{"mcpServers": {...}}` or the inner `{id: server}` mapping; disabled servers are dropped."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ToolRegistrationError("an MCP configuration must be an object")
    servers = config.get("mcpServers", config)
    if not isinstance(servers, Mapping):
        raise ToolRegistrationError("'mcpServers' must be an object of servers")
    parsed = {sid: parse_server(sid, raw) for sid, raw in servers.items()}
    return {sid: cfg for sid, cfg in parsed.items() if not cfg.disabled}


def load_config_file(path: str | os.PathLike[str]) -> dict[str, ServerConfig]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ToolRegistrationError(f"cannot read MCP configuration {os.fspath(path)!r}: {exc}") from exc
    return parse_config(data)
