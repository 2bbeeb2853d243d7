"""Served mode's costs, measured interleaved (A and B alternating in one run) and reported as ratios.

    python benches/serve_http.py [--calls 300]

1. One HTTP tool call, p50 and p99: `toolroute serve` vs the `mcp` SDK's own `MCPServer` serving
   the same function over streamable HTTP, both as processes on 127.0.0.1, one client session
   each, calls alternating between them. Same tool, same arguments, same answer (checked).
2. Authentication per call, in process: verifying a bearer JWT (ES256, RS256) the first time it
   is seen (a fresh token each round: the signature check) and again (the verified-token cache),
   and an API key (SQLite registry), against no verification, alternating.
3. Throughput through HAProxy: one balancer with two frontends, one over three `toolroute serve`
   replicas and one over a single replica, API-key users spread by the affinity header, the same
   concurrent load sent to each frontend in alternating bursts.
4. Memory per connected user: what one more user's door and workspace context cost a replica.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp import Client

HERE = Path(__file__).resolve().parent
TOOL_MODULE = textwrap.dedent(
    '''
    from toolroute import function_tool

    @function_tool(read_only=True)
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()
    '''
)
SDK_SERVER = textwrap.dedent(
    '''
    import sys, uvicorn
    from mcp.server import MCPServer

    mcp = MCPServer("plain")

    @mcp.tool()
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    app = mcp.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    print("ready", flush=True)
    uvicorn.Server(config).run()
    '''
)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_toolroute(folder: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    (folder / "bench_tools.py").write_text(TOOL_MODULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "toolroute", "serve", "--transport", "http", "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--modules", "bench_tools", "--functions", "shout", *extra], stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if " on http://" in line:
            return proc, line.rsplit(" on ", 1)[1].strip()
    raise RuntimeError("toolroute serve did not start")


def _start_sdk(folder: Path) -> tuple[subprocess.Popen[str], str]:
    (folder / "sdk_server.py").write_text(SDK_SERVER)
    port = _free_port()
    cmd = [sys.executable, str(folder / "sdk_server.py"), str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(1.0)  # uvicorn binds after "ready"
    return proc, f"http://127.0.0.1:{port}/mcp"


async def _latencies(urls: dict[str, str], calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in urls}
    async with Client(urls["toolroute"]) as a, Client(urls["sdk"]) as b:
        clients = {"toolroute": a, "sdk": b}
        for client in clients.values():  # warm both
            for _ in range(10):
                await client.call_tool("shout", {"text": "warm"})
        for i in range(calls):
            order = ("toolroute", "sdk") if i % 2 == 0 else ("sdk", "toolroute")
            for name in order:
                start = time.perf_counter()
                result = await clients[name].call_tool("shout", {"text": f"x{i}"})
                out[name].append(time.perf_counter() - start)
                assert result.content[0].text == f"X{i}", (name, result)  # like for like
    return out


def bench_http(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        procs = []
        try:
            tr, tr_url = _start_toolroute(folder)
            procs.append(tr)
            sdk, sdk_url = _start_sdk(folder)
            procs.append(sdk)
            lat = anyio.run(_latencies, {"toolroute": tr_url, "sdk": sdk_url}, calls)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=15)
    print(f"HTTP tool call, {calls} interleaved calls each (ms):")
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        a, b = _percentile(lat["toolroute"], q) * 1e3, _percentile(lat["sdk"], q) * 1e3
        print(f"  {label}: toolroute {a:.3f}  sdk MCPServer {b:.3f}  ratio toolroute/sdk {a / b:.3f}")


def bench_auth(rounds: int) -> None:
    from toolroute.serve.auth import ApiKeyVerifier, JwtVerifier
    from toolroute.serve.store import UserStore

    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"sub": "alice", "iss": "https://i", "aud": "a", "exp": int(time.time()) + 3600}
    pem = __import__("cryptography.hazmat.primitives.serialization", fromlist=["x"])

    def public(key: Any) -> str:
        return key.public_key().public_bytes(pem.Encoding.PEM, pem.PublicFormat.SubjectPublicKeyInfo).decode()

    es = JwtVerifier(issuer="https://i", audience="a", public_key=public(ec_key), algorithms=["ES256"])
    rs = JwtVerifier(issuer="https://i", audience="a", public_key=public(rsa_key), algorithms=["RS256"])
    es_token = jwt.encode(claims, ec_key, algorithm="ES256")
    rs_token = jwt.encode(claims, rsa_key, algorithm="RS256")
    # A token the verifier has never seen each round (a distinct `jti`): the signature check.
    es_fresh = iter([jwt.encode({**claims, "jti": str(i)}, ec_key, algorithm="ES256") for i in range(rounds + 1)])
    rs_fresh = iter([jwt.encode({**claims, "jti": str(i)}, rsa_key, algorithm="RS256") for i in range(rounds + 1)])
    with tempfile.TemporaryDirectory() as tmp, UserStore(f"sqlite:///{tmp}/u.db") as store:
        store.add_user("alice")
        key = store.add_key("alice")
        keys = ApiKeyVerifier(store)
        cases = {
            "none": lambda: None,
            "jwt ES256, first sight": lambda: es.access_token(next(es_fresh)),
            "jwt RS256, first sight": lambda: rs.access_token(next(rs_fresh)),
            "jwt ES256, seen before (cache)": lambda: es.access_token(es_token),
            "jwt RS256, seen before (cache)": lambda: rs.access_token(rs_token),
            "api key (sqlite)": lambda: keys.access_token(key),
        }
        for name, fn in cases.items():  # like for like: every verifier accepts alice
            if name != "none":
                token = fn()
                assert token is not None and token.subject == "alice", name  # type: ignore[attr-defined]
        times: dict[str, list[float]] = {name: [] for name in cases}
        names = list(cases)
        for r in range(rounds):
            shift = r % len(names)  # the order rotates: no side always runs first
            for name in names[shift:] + names[:shift]:
                fn = cases[name]
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["none"])
    print(f"authentication per call, {rounds} interleaved rounds (median µs over no verification):")
    for name, values in times.items():
        if name != "none":
            print(f"  {name}: {(statistics.median(values) - base) * 1e6:.1f} µs")


HAPROXY = """\
global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
frontend three
    bind 127.0.0.1:{three}
    default_backend three
frontend one
    bind 127.0.0.1:{one}
    default_backend one
backend three
    balance hdr(X-Toolroute-User)
    hash-type consistent
{servers}
backend one
{first}
"""


def _start_haproxy(folder: Path, replicas: list[str]) -> tuple[subprocess.Popen[bytes], str, str]:
    """One balancer, two frontends: over all `replicas` (user affinity), and over the first alone."""
    three, one = _free_port(), _free_port()
    addresses = [url.split("//")[1].split("/")[0] for url in replicas]
    servers = "\n".join(f"    server r{i} {address}" for i, address in enumerate(addresses))
    config = folder / "haproxy.cfg"
    config.write_text(HAPROXY.format(three=three, one=one, servers=servers, first=f"    server r0 {addresses[0]}"))
    proc = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # haproxy binds at once; a second covers a loaded machine
    return proc, f"http://127.0.0.1:{three}/mcp", f"http://127.0.0.1:{one}/mcp"


async def _burst(http: Any, url: str, bearers: dict[str, str], calls_per_user: int) -> float:
    """Every user sends `calls_per_user` calls one after another, all users at once; seconds taken."""
    import json

    async def user_calls(user: str, key: str) -> None:
        headers = {
            "Authorization": f"Bearer {key}",
            "X-Toolroute-User": user,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        for i in range(calls_per_user):
            text = f"{user}-{i}"
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "shout", "arguments": {"text": text}},
            }
            response = await http.post(url, content=json.dumps(body), headers=headers)
            assert response.status_code == 200 and text.upper() in response.text, response.text[:300]

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for user, key in bearers.items():
            tg.start_soon(user_calls, user, key)
    return time.perf_counter() - start


def bench_replicas(rounds: int, users: int, calls_per_user: int) -> None:
    import shutil

    import httpx2

    from toolroute.serve.store import UserStore

    if shutil.which("haproxy") is None:
        print("throughput through HAProxy: skipped (haproxy is not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store_url = f"sqlite:///{folder / 'users.db'}"
        with UserStore(store_url) as store:
            bearers = {}
            for i in range(users):
                store.add_user(f"u{i}")
                bearers[f"u{i}"] = store.add_key(f"u{i}")
        procs: list[subprocess.Popen[Any]] = []
        try:
            urls = []
            for _ in range(3):
                proc, url = _start_toolroute(folder, "--api-keys", "--store", store_url)
                procs.append(proc)
                urls.append(url)
            balancer, three, one = _start_haproxy(folder, urls)
            procs.append(balancer)

            async def run() -> dict[str, list[float]]:
                rates: dict[str, list[float]] = {"three replicas": [], "one replica": []}
                limits = httpx2.Limits(max_connections=users, max_keepalive_connections=users)
                async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
                    sides = {"three replicas": three, "one replica": one}
                    for url in sides.values():  # warm every replica and connection
                        await _burst(http, url, bearers, 3)
                    for r in range(rounds):
                        order = list(sides) if r % 2 == 0 else list(reversed(sides))
                        for name in order:
                            elapsed = await _burst(http, sides[name], bearers, calls_per_user)
                            rates[name].append(users * calls_per_user / elapsed)
                return rates

            rates = anyio.run(run)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=15)
    a, b = statistics.median(rates["three replicas"]), statistics.median(rates["one replica"])
    ratios = [x / y for x, y in zip(rates["three replicas"], rates["one replica"], strict=True)]
    shape = f"{users} users x {calls_per_user} calls per burst, {rounds} alternating bursts each"
    print(f"throughput through HAProxy, {shape}:")
    print(f"  three replicas {a:.0f} calls/s, one replica {b:.0f} calls/s, ratio {statistics.median(ratios):.2f}x")
    print(f"  (ratios per round pair: {', '.join(f'{x:.2f}' for x in ratios)}; os.cpu_count()={os.cpu_count()})")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_memory_per_user(users: int) -> None:
    """What one more connected user costs a replica: their door (exposure, as listed by
    `tools/list`) and workspace context. Python's own allocations (tracemalloc) and the process's
    resident set, which also counts the Rust core's and the allocator's share."""
    import gc
    import tracemalloc

    from toolroute import BuiltInToolContext, ToolRouter
    from toolroute.serve.tenants import Tenancy

    with tempfile.TemporaryDirectory() as tmp:
        router = ToolRouter(context=BuiltInToolContext(tmp))
        functions = ["read_file", "write_file", "edit", "apply_patch", "glob", "grep", "bash", "update_agents_md"]
        tenancy = Tenancy(router, functions, [], workspace_template=f"{tmp}/ws/{{user}}")

        def connect(name: str) -> None:
            tenancy.door(name).mcp_tools()
            tenancy.context(name)

        connect("warm")
        gc.collect()
        rss_before = _rss_bytes()
        for i in range(users):
            connect(f"rss{i}")
        gc.collect()
        rss = (_rss_bytes() - rss_before) / users
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for i in range(users):
            connect(f"user{i}")
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        router.close()
    print(f"memory per connected user (8 built-ins served and listed, own workspace), {users} users:")
    print(f"  Python allocations {grown / users / 1024:.1f} KiB, resident set {rss / 1024:.1f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--auth-rounds", type=int, default=2000)
    parser.add_argument("--bursts", type=int, default=6, help="throughput bursts per side")
    parser.add_argument("--only", choices=["auth", "memory", "http", "replicas"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["auth", "memory", "http", "replicas"])
    if "auth" in only:
        bench_auth(args.auth_rounds)
    if "memory" in only:
        bench_memory_per_user(1000)
    if "http" in only:
        bench_http(args.calls)
    if "replicas" in only:
        bench_replicas(args.bursts, users=12, calls_per_user=20)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
