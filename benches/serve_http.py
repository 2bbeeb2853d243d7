"""Served mode's costs, measured interleaved (A and B alternating in one run) and reported as ratios.

    python benches/serve_http.py [--calls 300]

1. One HTTP tool call, p50 and p99: `toolroute serve` vs the `mcp` SDK's own `MCPServer` serving
   the same function over streamable HTTP, both as processes on 127.0.0.1, one client session
   each, calls alternating between them. Same tool, same arguments, same answer (checked).
2. Authentication per call, in process: verifying a bearer JWT (ES256, RS256) and an API key
   (SQLite registry) vs no verification, alternating.
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


def _start_toolroute(folder: Path) -> tuple[subprocess.Popen[str], str]:
    (folder / "bench_tools.py").write_text(TOOL_MODULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "toolroute", "serve", "--transport", "http", "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--modules", "bench_tools", "--functions", "shout"], stderr=subprocess.PIPE, text=True, env=env
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
    with tempfile.TemporaryDirectory() as tmp, UserStore(f"sqlite:///{tmp}/u.db") as store:
        store.add_user("alice")
        key = store.add_key("alice")
        keys = ApiKeyVerifier(store)
        cases = {
            "none": lambda: None,
            "jwt ES256": lambda: es.access_token(es_token),
            "jwt RS256": lambda: rs.access_token(rs_token),
            "api key (sqlite)": lambda: keys.access_token(key),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, fn in cases.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["none"])
    print(f"authentication per call, {rounds} interleaved rounds (median µs over no verification):")
    for name, values in times.items():
        if name != "none":
            print(f"  {name}: {(statistics.median(values) - base) * 1e6:.1f} µs")


def bench_memory_per_user(users: int) -> None:
    """What one more authenticated user costs a replica: their door (exposure) and workspace context."""
    import tracemalloc

    from toolroute import BuiltInToolContext, ToolRouter
    from toolroute.serve.tenants import Tenancy

    with tempfile.TemporaryDirectory() as tmp:
        router = ToolRouter(context=BuiltInToolContext(tmp))
        functions = ["read_file", "write_file", "edit", "apply_patch", "glob", "grep", "bash", "update_agents_md"]
        tenancy = Tenancy(router, functions, [], workspace_template=f"{tmp}/ws/{{user}}")
        tenancy.door("warm")
        tenancy.context("warm")
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for i in range(users):
            tenancy.door(f"user{i}")
            tenancy.context(f"user{i}")
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        router.close()
    print(f"memory per connected user (8 built-ins served, own workspace): {grown / users / 1024:.1f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--auth-rounds", type=int, default=2000)
    args = parser.parse_args()
    bench_auth(args.auth_rounds)
    bench_memory_per_user(200)
    bench_http(args.calls)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
