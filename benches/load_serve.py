"""Served mode under load: many registered users, many connected at once, on 127.0.0.1.

    python benches/load_serve.py [--users 1000] [--connected 200] [--seconds 20] [--clients 4]
                                 [--idle-timeout 8] [--replicas 1]

One `toolroute serve` (HTTP, API keys from a SQLite registry, a workspace per user outside
/tmp), or with `--replicas N` that many behind HAProxy (users hashed onto them by the
`X-Toolroute-User` header) sharing a PostgreSQL registry, as docs/deploy.md deploys them.
Every registered user has an API key and an upstream MCP server of its own (the same demo
server process, registered once per user, so each user's calls go through a connection of its
own). `--connected` of them connect at once through the real `mcp` client, spread over
`--clients` client processes, and for `--seconds` each calls, in turn: write_file of a note only
it knows, read_file of it, grep for it, and its upstream `add` with numbers only it uses. Every
answer is checked to be that user's own. One client process is killed mid-run (its users
disconnect mid-call). Reported: calls per second, p50/p99 per tool, the server's resident memory
and open descriptors and processes (summed over the replicas) warm, while the users are
connected, after they have all left, after the idle release and a minute later (when the
per-user rate counters are pruned), and per connected user. With `--crowds N`, N crowds come one
after another, each of other users: what stays after each shows whether the server's memory
grows with the users it has met or only with the largest crowd.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "mcp_servers" / "demo_server.py"

CLIENT = r"""
import asyncio, json, sys, time
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

url, seconds = sys.argv[1], float(sys.argv[2])
own_servers = sys.argv[3:4] != ["builtins-only"]
users = json.loads(sys.stdin.read())  # [[user_id, number, key], ...]
times = {"write_file": [], "read_file": [], "grep": [], "upstream": []}
wrong = []
calls = 0

def text(result):
    return "".join(getattr(c, "text", "") for c in result.content)

async def one(user, number, key, deadline):
    global calls
    # The affinity header steers a balancer (HAProxy hashes on it); the server checks it names
    # the authenticated user.
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}", "X-Toolroute-User": user})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        i = 0
        while time.monotonic() < deadline:
            secret = f"secret-{user}-{i}"
            steps = [
                ("write_file", "write_file", {"path": "note.txt", "content": secret + "\n"}, None),
                ("read_file", "read_file", {"path": "note.txt"}, secret),
                ("grep", "grep", {"pattern": f"secret-{user}-", "output_mode": "content"}, secret),
                ("upstream", f"user_{user}_tool_add", {"a": number, "b": i}, str(number + i)),
            ][: 4 if own_servers else 3]
            for label, name, args, expect in steps:
                started = time.perf_counter()
                result = await client.call_tool(name, args)
                times[label].append(time.perf_counter() - started)
                calls += 1
                body = text(result)
                if result.is_error or (expect is not None and expect not in body) or (
                    label in ("read_file", "grep") and "secret-" in body.replace(f"secret-{user}-", "")
                ):
                    wrong.append([user, label, body[:200]])
            i += 1

async def main():
    deadline = time.monotonic() + seconds
    results = await asyncio.gather(*(one(u, n, k, deadline) for u, n, k in users), return_exceptions=True)
    errors = [repr(r)[:200] for r in results if isinstance(r, BaseException)]
    print(json.dumps({"times": times, "wrong": wrong, "calls": calls, "errors": errors}), flush=True)

asyncio.run(main())
"""


SMAPS_DIR: Path | None = None  # --smaps: a folder the memory maps of every sample are copied into
_samples = 0


def sample(pid: int) -> dict[str, Any]:
    """Resident memory (KiB; with its anonymous and file-backed parts), open descriptors and
    descendant processes of `pid`."""
    global _samples
    status = Path(f"/proc/{pid}/status").read_text()
    sizes = [line.split() for line in status.splitlines() if line.startswith(("VmRSS:", "Rss"))]
    kib = {fields[0].rstrip(":"): int(fields[1]) for fields in sizes}
    if SMAPS_DIR is not None:
        _samples += 1
        (SMAPS_DIR / f"{_samples:02d}-{pid}").write_text(Path(f"/proc/{pid}/smaps").read_text())
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":", 1)[0] if ":" in target else ("dir/file" if target.startswith("/") else target)
        kinds[kind] = kinds.get(kind, 0) + 1
    children = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children += 1
    return {
        "rss_kib": kib["VmRSS"],
        "anon_kib": kib.get("RssAnon", 0),
        "file_kib": kib.get("RssFile", 0),
        "fds": fds,
        "fd_kinds": kinds,
        "children": children,
    }


def start_upstream(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(DEMO), "--name", "upstream", "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    import socket

    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the upstream demo server did not start")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(
    base: Path,
    store_url: str,
    idle_timeout: float,
    name: str = "serve",
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
) -> tuple[subprocess.Popen[str], str]:
    exe = shutil.which("toolroute") or str(Path(sys.executable).with_name("toolroute"))
    args = [
        exe, "serve", "--transport", "http", "--port", "0",
        "--functions", "read_file,write_file,grep", "--api-keys", "--store", store_url,
        "--workspace-template", str(base / "ws" / "{user}"),
        "--calls-per-minute", "100000", "--idle-timeout", str(idle_timeout), *(extra_args or []),
    ]  # fmt: skip
    env = {**os.environ, **(extra_env or {}), "XDG_CONFIG_HOME": str(base / "config")}
    log = base / f"{name}.log"  # a file, not a pipe: a pipe nobody reads would stall the server's logging
    with log.open("w") as sink:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, text=True, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if " on http://" in line:
                return proc, line.rsplit(" on ", 1)[1].strip()
        if proc.poll() is not None:
            raise SystemExit(f"toolroute serve exited: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("toolroute serve did not start")


HAPROXY_CONFIG = """\
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    # Saturated replicas answer their health check late; a late answer must not mark one down.
    timeout check 10s
    retries 3
    option redispatch 1
frontend mcp
    bind 127.0.0.1:{port}
    default_backend toolroute
backend toolroute
    balance hdr(X-Toolroute-User)
    hash-type consistent
    option httpchk GET /healthz
    http-check expect status 200
    default-server check inter 2s fall 3 rise 2
{servers}
"""


def start_haproxy(base: Path, backends: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """HAProxy in front of the replicas, hashing users onto them (as docs/deploy.md sets it up)."""
    exe = shutil.which("haproxy") or "/usr/sbin/haproxy"
    port = free_port()
    servers = "\n".join(f"    server r{i} {url.split('//')[1].split('/')[0]}" for i, url in enumerate(backends))
    config = base / "haproxy.cfg"
    config.write_text(HAPROXY_CONFIG.format(port=port, servers=servers))
    proc = subprocess.Popen([exe, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                time.sleep(1.5)  # the health checks mark the replicas up
                return proc, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("haproxy did not start")


def sample_all(pids: list[int]) -> dict[str, Any]:
    """`sample` summed over the replicas."""
    total: dict[str, Any] = {"rss_kib": 0, "anon_kib": 0, "file_kib": 0, "fds": 0, "fd_kinds": {}, "children": 0}
    for pid in pids:
        one = sample(pid)
        for part in ("rss_kib", "anon_kib", "file_kib"):
            total[part] += one[part]
        total["fds"] += one["fds"]
        total["children"] += one["children"]
        for kind, n in one["fd_kinds"].items():
            total["fd_kinds"][kind] = total["fd_kinds"].get(kind, 0) + n
    return total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def users_of(users: list[tuple[str, int, str]], k: int, connected: int) -> list[tuple[str, int, str]]:
    """The `k`th crowd: the next `connected` registered users (wrapping around)."""
    return [users[(k * connected + i) % len(users)] for i in range(connected)]


def crowd(
    url: str, pids: list[int], users: list[tuple[str, int, str]], k: int, args: argparse.Namespace
) -> tuple[dict[str, Any], list[dict[str, Any]], list[Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One crowd: connect, call for `args.seconds` (one client killed mid-run), leave; samples
    while connected, after leaving, after the idle release and a minute later."""
    chosen = users_of(users, k, args.connected)
    groups = [chosen[i :: args.clients] for i in range(args.clients)]
    clients = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, url, str(args.seconds), *([] if args.own_servers else ["builtins-only"])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in groups
    ]
    for proc, group in zip(clients, groups, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(group))
        proc.stdin.close()
    time.sleep(args.seconds * 0.6)
    connected = sample_all(pids)
    os.kill(clients[-1].pid, signal.SIGKILL)  # its users disconnect mid-call
    outcomes = []
    for proc in clients[:-1]:
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read()
        if proc.wait(timeout=args.seconds * 4 + 120) != 0:
            raise SystemExit(f"a client failed: {proc.stderr.read()[-2000:]}")
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    clients[-1].wait(30)
    time.sleep(5.0)  # sessions closed, per-call state released
    after = sample_all(pids)
    time.sleep(args.idle_timeout * 1.25 + 2.0)  # past the idle timeout and one release round
    released = sample_all(pids)
    time.sleep(72.0 + args.idle_timeout / 4)  # the rate counters' minute has passed: pruned too
    pruned = sample_all(pids)
    return connected, outcomes, groups, after, released, pruned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--connected", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--replicas", type=int, default=1, help="servers behind HAProxy, with a PostgreSQL registry (1: one server)"
    )
    parser.add_argument(
        "--crowds",
        type=int,
        default=1,
        help="crowds one after another, each of other users: is what stays a high-water mark or growth?",
    )
    parser.add_argument(
        "--idle-timeout", type=float, default=8.0, help="the server's: users are released this long after they left"
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in the servers' environment only (an allocator to try, say: LD_PRELOAD=..., PYTHONMALLOC=malloc)",
    )
    parser.add_argument(
        "--no-own-servers",
        dest="own_servers",
        action="store_false",
        help="users without an upstream server of their own: what a user costs with the built-ins alone",
    )
    parser.add_argument("--smaps", type=Path, help="copy the servers' memory maps at every sample into this folder")
    args = parser.parse_args()
    if args.smaps is not None:
        global SMAPS_DIR
        args.smaps.mkdir(parents=True, exist_ok=True)
        SMAPS_DIR = args.smaps
    server_env = dict(item.split("=", 1) for item in args.server_env)
    from toolroute.serve.store import UserStore

    base = Path(tempfile.mkdtemp(prefix="toolroute-load-", dir="/var/tmp"))  # a sandbox replaces /tmp
    base.chmod(0o711)  # tenants' uids pass through to their workspaces (entries stay unlistable)
    upstream = start_upstream(free_port_holder := free_port())
    servers: list[subprocess.Popen[str]] = []
    stack = contextlib.ExitStack()
    try:
        os.environ["XDG_CONFIG_HOME"] = str(base / "config")  # the registry's key file, as the server's
        if args.replicas > 1:
            sys.path.insert(0, str(ROOT / "testing"))
            from _postgres import postgres_server  # the throwaway PostgreSQL the tests use too

            store_url = stack.enter_context(postgres_server())
        else:
            store_url = f"sqlite:///{base / 'users.db'}"
        users: list[tuple[str, int, str]] = []
        with UserStore(store_url) as store:
            for n in range(args.users):
                user = f"u{n:04d}"
                store.add_user(user)
                if args.own_servers:
                    store.add_server(user, "mine", {"url": f"http://127.0.0.1:{free_port_holder}/mcp"})
                users.append((user, n, store.add_key(user)))
        urls = []
        for i in range(args.replicas):
            server, replica_url = start_server(base, store_url, args.idle_timeout, f"serve-{i}", server_env)
            servers.append(server)
            urls.append(replica_url)
        url = urls[0]
        if args.replicas > 1:
            balancer, url = start_haproxy(base, urls)
            stack.callback(lambda: (balancer.terminate(), balancer.wait(10)))
        pids = [s.pid for s in servers]
        time.sleep(1.0)
        cold = sample_all(pids)
        # One user (not among those measured) first, so the base counts what any first request
        # loads once (lazy imports, compiled validators, buffers), not per user.
        warm = subprocess.run(
            [sys.executable, "-c", CLIENT, url, "2", *([] if args.own_servers else ["builtins-only"])],
            input=json.dumps([users[-1]]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if warm.returncode != 0:
            raise SystemExit(f"the warm-up client failed: {warm.stderr[-2000:]}")
        time.sleep(args.idle_timeout * 1.25 + 2.0)  # and released again
        at_start = sample_all(pids)
        crowds = [crowd(url, pids, users, k, args) for k in range(args.crowds)]
        connected, outcomes, groups, after, released, pruned = crowds[0]
        times: dict[str, list[float]] = {}
        for o in outcomes:
            for label, values in o["times"].items():
                times.setdefault(label, []).extend(values)
        calls = sum(o["calls"] for o in outcomes)
        wrong = [w for o in outcomes for w in o["wrong"]]
        errors = [e for o in outcomes for e in o["errors"]]
        finished = len(groups) - 1
        counted_users = sum(len(g) for g in groups[:finished])
        print(
            f"users registered {args.users}, connected {args.connected} over {args.clients} clients, {args.seconds:g} s"
            + (f", {args.replicas} replicas behind HAProxy (PostgreSQL registry)" if args.replicas > 1 else "")
        )
        print(f"calls answered (by the clients that ran to the end: {counted_users} users): {calls}, "
              f"{calls / args.seconds:.0f}/s; wrong answers: {len(wrong)}; session errors: {len(errors)}")  # fmt: skip
        for label, values in times.items():
            p50, p99 = pct(values, 0.5), pct(values, 0.99)
            print(f"  {label:<10} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   ({len(values)} calls)")
        print(f"server cold:        {cold}")
        print(f"server warm (base): {at_start}")
        print(f"while connected:    {connected}")
        print(f"after all left:     {after}")
        print(f"after idle release: {released}")
        print(f"a minute later:     {pruned}")
        per_connected = (connected["rss_kib"] - at_start["rss_kib"]) / max(args.connected, 1)
        per_idle = (after["rss_kib"] - at_start["rss_kib"]) / max(args.connected, 1)
        per_released = (released["rss_kib"] - at_start["rss_kib"]) / max(args.connected, 1)
        per_pruned = (pruned["rss_kib"] - at_start["rss_kib"]) / max(args.connected, 1)
        print(
            f"resident memory per connected user: {per_connected:.0f} KiB; per user after leaving: {per_idle:.0f} KiB;"
            f" after the idle release: {per_released:.0f} KiB; a minute later: {per_pruned:.0f} KiB"
        )
        if wrong:
            print("WRONG:", json.dumps(wrong[:5]))
        if errors:
            print("ERRORS:", json.dumps(errors[:5]))
        print(f"median call {statistics.median([v for vs in times.values() for v in vs]) * 1000:.1f} ms")
        for k, (_, later, _, _, _, minute) in enumerate(crowds[1:], start=2):
            wrong_later = sum(len(o["wrong"]) for o in later)
            print(
                f"crowd {k} (users {users_of(users, k - 1, args.connected)[0][0]}...): a minute after it left"
                f" {minute['rss_kib']} KiB ({minute['rss_kib'] - pruned['rss_kib']:+d} KiB against crowd 1's),"
                f" {minute['fds']} descriptors; wrong answers: {wrong_later}"
            )
    finally:
        logs = sorted(base.glob("serve-*.log"))
        errors_logged = sum(log.read_text().count("Traceback") for log in logs)
        print(f"tracebacks in the servers' logs: {errors_logged} (a client killed mid-call leaves some)")
        # What they were: the exception line ending each (a killed client's are disconnects).
        kinds: dict[str, int] = {}
        for log in logs:
            lines = log.read_text().splitlines()
            for i, line in enumerate(lines):
                if line.startswith("Traceback"):
                    end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith((" ", "\t"))), None)
                    if end is not None:  # by kind: names and numbers in quotes vary
                        kind = re.sub(r"'[^']*'", "'...'", lines[end])[:120]
                        kinds[kind] = kinds.get(kind, 0) + 1
        for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  {count} x {kind}")
        for server in servers:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        stack.close()
        upstream.terminate()
        upstream.wait(10)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
