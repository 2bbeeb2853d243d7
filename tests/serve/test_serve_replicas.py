"""Several machines, on one: HAProxy in front of three `toolroute serve` replicas that share a real
PostgreSQL user registry. Two tenants call through the balancer with bearer tokens; one replica
is SIGKILLed mid-run; every later call still succeeds and no call reaches another tenant's tools.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from _ports import free_port
from _postgres import postgres_server
from _serve_helpers import TOOLS_MODULE, http_server_process, processes_with, stop_process
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolroute.serve.store import UserStore

ISSUER, AUDIENCE = "https://issuer.test", "toolroute-replicas"
KEY = ec.generate_private_key(ec.SECP256R1())
ROUNDS, KILL_AFTER = 10, 4
HAPROXY_CONFIG = """\
global
    maxconn 256
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # A refused connection (a dead replica) is tried again on another one.
    retries 3
    option redispatch 1
frontend mcp
    bind 127.0.0.1:{port}
    default_backend toolroute
backend toolroute
    # User affinity: the same user lands on the same replica while it lives (the gateway checks
    # that the header names the authenticated user).
    balance hdr(X-Toolroute-User)
    hash-type consistent
    option httpchk GET /healthz
    http-check expect status 200
    default-server check inter 300ms fall 2 rise 2
{servers}
"""


@contextmanager
def haproxy(backends: list[str]) -> Iterator[str]:
    exe = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(exe).is_file():
        pytest.skip("HAProxy (Debian package haproxy) is not installed")
    port = free_port()
    servers = "\n".join(
        f"    server r{i} {url.split('//')[1].split('/')[0]}" for i, url in enumerate(backends, start=1)
    )
    folder = Path(tempfile.mkdtemp(prefix="toolroute-haproxy-"))
    config = folder / "haproxy.cfg"
    config.write_text(HAPROXY_CONFIG.format(port=port, servers=servers))
    proc = subprocess.Popen([exe, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"haproxy did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)
        shutil.rmtree(folder, ignore_errors=True)


def _jwt(sub: str) -> str:
    claims = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 600}
    return jwt.encode(claims, KEY, algorithm="ES256")


async def _call(url: str, bearer: str, user: str, tool: str, args: dict[str, Any]) -> tuple[list[str], Any]:
    headers = {"Authorization": f"Bearer {bearer}", "X-Toolroute-User": user}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        return names, await client.call_tool(tool, args)


def _messages(exc: BaseException) -> str:
    """Every message in an exception and the groups it is nested in."""
    inner = getattr(exc, "exceptions", ())
    return " | ".join([str(exc), *(_messages(e) for e in inner)])


def _records(audit: Path) -> list[dict[str, Any]]:
    if not audit.exists():
        return []
    return [json.loads(line) for line in audit.read_text().splitlines()]


def _replica_users(audit: Path) -> list[str]:
    return [r["user"] for r in _records(audit)]


def _replica_tools(audit: Path, user: str) -> list[str]:
    return [r["tool"] for r in _records(audit) if r["user"] == user]


def _start(marker: str) -> dict[str, Any]:
    return {"action": "start", "command": f"sleep 600; echo {marker}"}


def _poll(process_id: str, action: str = "status") -> dict[str, Any]:
    return {"action": action, "process_id": process_id}


def _reap(marker: str) -> None:
    """The killed replica's command dies with it (its death watch); never leave one behind."""
    deadline = time.monotonic() + 15
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_three_replicas_behind_haproxy_survive_losing_one(tmp_path: Path, deployed: Path) -> None:
    pem = tmp_path / "key.pem"
    from cryptography.hazmat.primitives import serialization

    pem.write_bytes(
        KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with ExitStack() as stack:
        dsn = stack.enter_context(postgres_server())
        with UserStore(dsn) as store:
            store.add_user("alice")
            store.add_user("bob")
            bob_key = store.add_key("bob")
        bearers = {"alice": _jwt("alice"), "bob": bob_key}
        replicas = []
        for i in range(3):
            args = [
                *("--modules", TOOLS_MODULE, "--functions", "echo,write_file,read_file,bash"),
                *("--auth-public-key", str(pem), "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE),
                *("--api-keys", "--store", dsn, "--workspace-template", str(deployed / "ws" / "{user}")),
                *("--audit-log", str(tmp_path / f"audit-{i}.jsonl")),
            ]
            replicas.append(stack.enter_context(http_server_process(args)))
        audits = [tmp_path / f"audit-{i}.jsonl" for i in range(3)]
        front = stack.enter_context(haproxy([url for _, url in replicas]))

        # A request whose affinity header names someone else is refused, whoever's replica it hits.
        with pytest.raises(BaseException) as refused:
            anyio.run(_call, front, bearers["alice"], "bob", "echo", {"text": "x"})
        assert "does not name the authenticated user" in _messages(refused.value)

        # alice starts a background process: it lives on the replica her calls land on.
        marker = f"toolroute-replica-{time.monotonic_ns()}"
        _, started = anyio.run(_call, front, bearers["alice"], "alice", "bash", _start(marker))
        assert not started.is_error, started.content[0].text
        process_id = json.loads(started.content[0].text)["processId"]
        stack.callback(_reap, marker)

        killed = None
        for round_ in range(ROUNDS):
            if round_ == KILL_AFTER:
                _, status = anyio.run(_call, front, bearers["alice"], "alice", "bash", _poll(process_id))
                assert json.loads(status.content[0].text)["status"] == "RUNNING", status.content[0].text
                # SIGKILL the replica alice's calls have been landing on.
                victim = max(range(len(audits)), key=lambda i: _replica_users(audits[i]).count("alice"))
                assert "bash" in _replica_tools(audits[victim], "alice")  # where her process runs
                replicas[victim][0].send_signal(signal.SIGKILL)
                replicas[victim][0].wait(timeout=30)
                killed = victim
                # The replica that took alice over knows nothing of the id: it says it is lost.
                for action in ("status", "stop"):
                    _, lost = anyio.run(_call, front, bearers["alice"], "alice", "bash", _poll(process_id, action))
                    text = lost.content[0].text
                    assert lost.is_error and "is lost: it was started on another server instance" in text, text
            for user in ("alice", "bob"):
                text = f"{user}-{round_}"
                names, result = anyio.run(_call, front, bearers[user], user, "echo", {"text": text})
                other = "bob" if user == "alice" else "alice"
                assert not result.is_error and result.content[0].text == text, (round_, user, result)
                assert not any(n.startswith(f"user_{other}_") for n in names)
        assert killed is not None
        # Before the kill each user stayed on one replica (affinity); afterwards others took over.
        for user in ("alice", "bob"):
            holders = {i for i, a in enumerate(audits) if user in _replica_users(a)}
            assert holders, user
        survivors = [a for i, a in enumerate(audits) if i != killed]
        assert sum(_replica_users(a).count("alice") for a in survivors) >= ROUNDS - KILL_AFTER
