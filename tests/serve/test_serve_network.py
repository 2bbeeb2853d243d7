"""A served tenant's network stops at the internet (issue 55): a real `toolroute serve` over HTTP
with API keys and `--network`, its registry a PostgreSQL on TCP 127.0.0.1 with trust
authentication (the attack: `psql -h 127.0.0.1` read the registry and minted another tenant's
key), workspaces outside /tmp, bubblewrap, per-tenant uids (the suite runs as root).

The internet is the test's own network namespace (`_stand_in_internet.py`), a private (10.x) and
the metadata address routed into it: nothing is ever sent off this machine, and a leak would show
in the stand-in's log. Tenants' commands and their own stdio servers are attacked alike; an
allowlist deployment (`--network-allow`) shows a refusal reaching the command and the audit log.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from _mcp_helpers import tenant_stdio
from _postgres import postgres_server
from _serve_helpers import ServedProcess, outside_tmp, run_cli, served_http, tool_env
from _stand_in_internet import StandIn, stand_in_internet
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.builtins._process import netns
from toolroute.builtins._process.sandbox import SandboxUnavailable, bwrap_path
from toolroute.serve.secrets import SecretBox
from toolroute.serve.store import UserStore

NAMES = {"pkgs.stand-in.test": "internet", "other.stand-in.test": "internet"}


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "per-tenant uids and the stand-in internet need root"
    try:
        bwrap_path()
        netns.probe(1879048192)
    except (SandboxUnavailable, netns.NetworkUnavailable) as exc:
        return str(exc)
    return None


pytestmark = pytest.mark.skipif(bool(_unavailable()), reason=str(_unavailable()))


@dataclass
class Deployment:
    served: ServedProcess
    base: Path
    keys: dict[str, str]
    internet: StandIn
    pg_port: int | None = None

    @property
    def url(self) -> str:
        return self.served.url


@pytest.fixture(scope="module")
def internet() -> Iterator[StandIn]:
    with stand_in_internet(NAMES) as stand_in:
        yield stand_in


def _register(dsn: str, base: Path) -> dict[str, str]:
    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(base / "config")
    try:
        with UserStore(dsn, SecretBox()) as store:
            keys = {}
            for user in ("alice", "bob"):
                store.add_user(user)
                keys[user] = store.add_key(user)
            store.add_server("alice", "own", tenant_stdio("alice-own"))
            return keys
    finally:
        if saved is None:
            os.environ.pop("XDG_CONFIG_HOME")
        else:
            os.environ["XDG_CONFIG_HOME"] = saved


def _serve(dsn: str, base: Path, network: list[str]) -> Iterator[ServedProcess]:
    env = tool_env(XDG_CONFIG_HOME=str(base / "config"), XDG_CACHE_HOME=str(base / "cache"))
    args = [
        *("--functions", "bash,run_code", "--api-keys", "--store", dsn),
        *("--workspace-template", str(base / "ws" / "{user}"), "--sandbox", "bubblewrap"),
        *("--audit-log", str(base / "audit.jsonl"), *network),
    ]
    with served_http(args, env) as served:
        yield served


@pytest.fixture(scope="module")
def deployed(internet: StandIn) -> Iterator[Deployment]:
    """`--network`: the internet, with the registry on TCP 127.0.0.1 (trust authentication)."""
    base = outside_tmp()
    try:
        with postgres_server() as dsn:
            keys = _register(dsn, base)
            for served in _serve(dsn, base, ["--network"]):
                port = urlsplit(dsn.replace("postgresql://", "http://")).port
                yield Deployment(served, base, keys, internet, port)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def allowlisted(internet: StandIn) -> Iterator[Deployment]:
    """`--network-allow pkgs.stand-in.test`, names resolved by the stand-in's resolver."""
    base = outside_tmp()
    try:
        (base / "registry").mkdir()
        dsn = f"sqlite:///{base / 'registry' / 'users.db'}"
        keys = _register(dsn, base)
        network = ["--network-allow", "pkgs.stand-in.test", "--network-dns", internet.internet]
        for served in _serve(dsn, base, network):
            yield Deployment(served, base, keys, internet)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def _session_call(url: str, key: str, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool(name, arguments)
        return bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)


def call(d: Deployment, user: str, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    return anyio.run(_session_call, d.url, d.keys[user], name, arguments)


def bash(d: Deployment, user: str, command: str) -> dict[str, Any]:
    failed, text = call(d, user, "bash", {"command": command, "timeout": 120})
    assert not failed, text
    out: dict[str, Any] = json.loads(text)
    return out


def _tcp(host: str, port: int) -> str:
    return f"timeout 5 bash -c 'echo > /dev/tcp/{host}/{port}' 2>&1 && echo reached-{host} || echo refused-{host}"


def test_a_tenant_command_reaches_the_internet_and_not_the_registry_nor_the_server(deployed: Deployment) -> None:
    d, stand_in = deployed, deployed.internet
    server_port = urlsplit(d.url).port
    assert server_port is not None and d.pg_port is not None
    command = "; ".join(
        [
            f"psql -h 127.0.0.1 -p {d.pg_port} -U toolroute -d postgres -c 'select count(*) from users' 2>&1; "
            "echo psql-rc=$?",
            _tcp("127.0.0.1", d.pg_port),
            _tcp("127.0.0.1", server_port),
            _tcp(stand_in.private, 80),
            _tcp(stand_in.metadata, 80),
            f"curl -sS -m 20 http://{stand_in.internet}/",
        ]
    )
    out = bash(d, "alice", command)
    text = out["stdout"]
    assert "psql-rc=0" not in text and "count" not in text, out
    assert "reached-" not in text, out
    for host in ("127.0.0.1", stand_in.private, stand_in.metadata):
        assert f"refused-{host}" in text, out
    assert f"hello from {stand_in.internet}" in text, out
    assert out["sandbox"]["network"] == "internet"
    assert stand_in.private not in stand_in.reached() and stand_in.metadata not in stand_in.reached()


def test_a_tenant_s_own_stdio_server_gets_the_same_network(deployed: Deployment) -> None:
    d, stand_in = deployed, deployed.internet
    assert d.pg_port is not None
    for host, port in (("127.0.0.1", d.pg_port), (stand_in.private, 80), (stand_in.metadata, 80)):
        failed, text = call(d, "alice", "user_alice_tool_tcp", {"host": host, "port": port})
        assert failed and "connected" not in text, (host, text)
    failed, text = call(d, "alice", "user_alice_tool_tcp", {"host": stand_in.internet, "port": 80})
    assert not failed and "connected: HTTP/1.0 200 OK" in text, text
    assert stand_in.private not in stand_in.reached() and stand_in.metadata not in stand_in.reached()


def test_a_tenant_s_code_program_gets_the_same_network(deployed: Deployment) -> None:
    d, stand_in = deployed, deployed.internet
    assert d.pg_port is not None
    program = f"""
import socket
for host, port in (("127.0.0.1", {d.pg_port}), ({stand_in.private!r}, 80), ({stand_in.internet!r}, 80)):
    try:
        socket.create_connection((host, port), timeout=5).close()
        print(host, "reached")
    except OSError as e:
        print(host, "refused", type(e).__name__)
"""
    failed, text = call(d, "bob", "run_code", {"code": program})
    assert not failed, text
    assert "127.0.0.1 refused" in text and f"{stand_in.private} refused" in text, text
    assert f"{stand_in.internet} reached" in text, text


def test_an_allowlisted_tenant_is_refused_with_the_rule_and_audited(allowlisted: Deployment) -> None:
    d, stand_in = allowlisted, allowlisted.internet
    out = bash(d, "alice", "curl -sS -m 20 http://pkgs.stand-in.test/; curl -sS -m 20 http://other.stand-in.test/")
    assert f"hello from {stand_in.internet}" in out["stdout"], out
    assert (
        "toolroute: connection to other.stand-in.test:80 refused: other.stand-in.test is not in the network "
        "allowlist (pkgs.stand-in.test)"
    ) in out["stdout"], out
    lines = [json.loads(line) for line in (d.base / "audit.jsonl").read_text().splitlines()]
    network = [line for line in lines if line.get("event") == "network"]
    assert {
        "user": "alice",
        "destination": "other.stand-in.test:80",
        "via": "http",
        "outcome": "refused",
    }.items() <= network[-1].items(), network
    assert "not in the network allowlist" in network[-1]["reason"]


def test_serve_refuses_the_host_s_network(tmp_path: Path) -> None:
    proc = run_cli(
        *("serve", "--transport", "http", "--port", "0", "--functions", "bash", "--sandbox", "bubblewrap"),
        *("--api-keys", "--store", f"sqlite:///{tmp_path / 'r.db'}"),
        *("--workspace-template", str(tmp_path / "ws" / "{user}")),
        *("--network", "host"),
        env=tool_env(XDG_CONFIG_HOME=str(tmp_path / "config")),
    )
    assert proc.returncode != 0 and "--network host shares the server's network namespace" in proc.stderr, proc.stderr


def test_serve_refuses_to_start_with_network_where_pasta_is_missing(tmp_path: Path) -> None:
    workspaces = outside_tmp()
    tools = workspaces / "bin"  # (bwrap is probed as a tenant's uid: the folder must be passable)
    tools.mkdir()
    for name in ("bwrap", "bash", "sh", "ip", "true"):
        found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
        assert found is not None
        (tools / name).symlink_to(found)
    try:
        proc = run_cli(
            *("serve", "--transport", "http", "--port", "0", "--functions", "bash", "--sandbox", "bubblewrap"),
            *("--api-keys", "--store", f"sqlite:///{tmp_path / 'r.db'}"),
            *("--workspace-template", str(workspaces / "ws" / "{user}"), "--network"),
            env=tool_env(XDG_CONFIG_HOME=str(tmp_path / "config"), PATH=str(tools)),
        )
    finally:
        shutil.rmtree(workspaces, ignore_errors=True)
    assert proc.returncode != 0, proc.stderr
    assert "refusing to start with --network: pasta is not installed (Debian/Ubuntu package: passt)" in proc.stderr
