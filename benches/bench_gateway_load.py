"""The served gateway at load: one upstream reached directly, through `toolroute serve`, and through
`mcp-proxy` (PyPI), each over streamable HTTP with the `mcp` SDK's client (issue 56).

    python benches/bench_gateway_load.py [--rounds 3] [--sessions 1,8,32,128] [--calls 20]
                                         [--sides direct,toolroute,mcp-proxy] [--idle 200]
                                         [--profile FILE] [--layers FILE]

The upstream is testing/_gateway_upstream.py (echo, a 50 KB result with structuredContent and a
`_meta`, 500 filler tools): served over HTTP for "direct", over stdio behind the two gateways.
mcp-proxy needs mcp 1.x, so it lives in a virtual environment of its own outside the repository
(`$TOOLROUTE_MCP_PROXY_VENV`, default ~/.cache/toolroute-bench/mcp-proxy), created on first use;
when that fails the side is skipped with the reason.

Rounds are interleaved (the sides' order rotates per round), so a loaded machine's load hits every
side alike; ratios are medians of per-round ratios, with their spread (min-max). Every answer is
checked against its request, and each gateway's answers against direct's (content, structured
content, isError, the result's `_meta` but for the SDK's serverInfo stamp). Workloads: at one
session, echo p50 and a 50 KB result's p50; a 500-tool listing repeated; at N sessions opened at
once, each making `--calls` calls (echo and, one call in eight, the 50 KB result): calls/s, p50,
p99 and the servers' CPU per call (the gateway and its upstream process together); then the
resident memory per idle session (`--idle` sessions held open at once, above the warm server). With
`--profile FILE`, toolroute is run under yappi (CPU clock, all threads) and its profile written
to FILE (a pstats file) at the end; no other side runs then. With `--layers FILE`, toolroute is
run with a wall clock around each layer a call passes (HTTP app, the SDK's request handler, the
served door, the router's door, the gateway, its loop thread, the SDK's client session, the
upstream's stdio pipe) and each layer's p50 is printed (its samples written to FILE, JSON): where
a call's time goes, waits included (a CPU profile misses them); no other side runs then.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "testing" / "_gateway_upstream.py"
PROXY_VENV = Path(os.environ.get("TOOLROUTE_MCP_PROXY_VENV", Path.home() / ".cache/toolroute-bench/mcp-proxy"))
STAMP = "io.modelcontextprotocol/serverInfo"
BIG = 50_000
TOOLS = 500
CLIENT_TIMEOUT = 600.0  # seconds, for every phase of a request (see `session`)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- the sides ----------------------------------------------------------------------------


@dataclass
class Side:
    name: str
    url: str
    proc: subprocess.Popen[bytes]
    cpu_pids: list[int] = field(default_factory=list)

    def cpu(self) -> float:
        """CPU seconds of the server process and all its descendants (the stdio upstream)."""
        total = 0.0
        for pid in _tree(self.proc.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def rss_kib(self) -> int:
        total = 0
        for pid in _tree(self.proc.pid):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        return total


def _tree(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _wait_http(url: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited ({proc.returncode})")
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, timeout=1)
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url}: no answer in {seconds} s")


def start_direct(tmp: Path) -> Side:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(UPSTREAM), "--http", str(port), "--tools", str(TOOLS)])
    url = f"http://127.0.0.1:{port}/mcp"
    _wait_http(url, proc)
    return Side("direct", url, proc)


PROFILED = """
import atexit, os, sys, yappi
out = sys.argv.pop(1)
yappi.set_clock_type("cpu")
yappi.start(builtins=False)
def dump():
    yappi.stop()
    yappi.get_func_stats().save(out, type="pstat")
atexit.register(dump)
_exit = os._exit
os._exit = lambda code: (dump(), _exit(code))  # toolroute serve skips the interpreter's teardown
from toolroute.cli import main
sys.argv[0] = "toolroute"
sys.exit(main(sys.argv[1:]))
"""


LAYERED = """
import atexit, functools, json, os, sys, time
from collections import defaultdict
out = sys.argv.pop(1)
spans = defaultdict(list)
def timed(owner, name, label):
    inner = getattr(owner, name)
    @functools.wraps(inner)
    async def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return await inner(*args, **kwargs)
        finally:
            spans[label].append(time.perf_counter() - started)
    setattr(owner, name, wrapper)
def dump():
    with open(out, "w") as f:
        json.dump(spans, f)
atexit.register(dump)
_exit = os._exit
os._exit = lambda code: (dump(), _exit(code))
import mcp_types
from mcp.client.session import ClientSession
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from toolroute.mcp import stdio
from toolroute.mcp.calls import Calls
from toolroute.mcp.gateway import McpGateway
from toolroute.serve.doors import ServedTools
from toolroute.serve.tenant_doors import TenantDoors
timed(StreamableHTTPASGIApp, "__call__", "1 HTTP app (a request, parsed to answered)")
timed(ServerRunner, "_on_request", "2 SDK request handler")
timed(TenantDoors, "call_tool", "3 served door")
timed(ServedTools, "call", "4 router's door")
timed(McpGateway, "acall", "5 gateway (the hop to its loop thread and back)")
timed(Calls, "call", "6 gateway's call on its loop")
timed(ClientSession, "send_request", "7 SDK client session")
marks = {}
_dump_json = mcp_types.JSONRPCRequest.model_dump_json
def written(self, *args, **kwargs):
    if self.method == "tools/call":
        marks["out"] = time.perf_counter()
    return _dump_json(self, *args, **kwargs)
mcp_types.JSONRPCRequest.model_dump_json = written
_malformed = stdio.malformed
def read(line):
    if "out" in marks:
        spans["8 upstream over stdio (request written to reply read)"].append(time.perf_counter() - marks.pop("out"))
    return _malformed(line)
stdio.malformed = read
from toolroute.cli import main
sys.argv[0] = "toolroute"
sys.exit(main(sys.argv[1:]))
"""


def start_toolroute(tmp: Path, profile: Path | None = None, layers: Path | None = None) -> Side:
    port = free_port()
    config = tmp / "servers.json"
    upstream = {"command": sys.executable, "args": [str(UPSTREAM), "--tools", str(TOOLS)]}
    config.write_text(json.dumps({"mcpServers": {"up": upstream}}))
    serve = ["serve", "--transport", "http", "--port", str(port), "--mcp-config", str(config), "--mcp-servers", "up"]
    serve += ["--workspace", str(tmp)]
    if profile is not None:
        command = [sys.executable, "-c", PROFILED, str(profile), *serve]
    elif layers is not None:
        command = [sys.executable, "-c", LAYERED, str(layers), *serve]
    else:
        command = [sys.executable, "-m", "toolroute", *serve]
    proc = subprocess.Popen(command, cwd=tmp)
    url = f"http://127.0.0.1:{port}/mcp"
    _wait_http(url, proc)
    return Side("toolroute", url, proc)


def proxy_venv() -> Path | str:
    """mcp-proxy's executable, installed into its own venv on first use; or why it cannot be."""
    exe = PROXY_VENV / "bin" / "mcp-proxy"
    if exe.exists():
        return exe
    try:
        subprocess.run([sys.executable, "-m", "venv", str(PROXY_VENV)], check=True, capture_output=True)
        pip = PROXY_VENV / "bin" / "pip"
        subprocess.run([str(pip), "install", "-q", "mcp-proxy>=0.13,<0.14"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return f"could not install mcp-proxy into {PROXY_VENV}: {exc} {detail.decode(errors='replace')[-300:]}"
    return exe if exe.exists() else f"mcp-proxy missing from {PROXY_VENV} after install"


def start_proxy(tmp: Path) -> Side | str:
    exe = proxy_venv()
    if isinstance(exe, str):
        return exe
    port = free_port()
    command = [str(exe), "--port", str(port), "--host", "127.0.0.1", "--log-level", "WARNING"]
    command += ["--", sys.executable, str(UPSTREAM), "--tools", str(TOOLS)]
    proc = subprocess.Popen(command, cwd=tmp)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_http(url, proc)
    except RuntimeError as exc:
        proc.kill()
        return f"mcp-proxy did not start: {exc}"
    return Side("mcp-proxy", url, proc)


def stop(side: Side) -> None:
    side.proc.terminate()  # SIGTERM: a graceful stop for every side, without a traceback
    try:
        side.proc.wait(15)
    except subprocess.TimeoutExpired:
        side.proc.kill()
        side.proc.wait()


# ---- the client ---------------------------------------------------------------------------


def comparable(result: Any) -> dict[str, Any]:
    """A call's result as compared across sides: everything but the SDK's serverInfo stamp."""
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped.pop("resultType", None)
    meta = {k: v for k, v in (dumped.pop("_meta", None) or {}).items() if k != STAMP}
    if meta:
        dumped["_meta"] = meta
    return dumped


def expected(name: str, args: dict[str, Any]) -> str:
    if name == "echo":
        return str(args["text"])
    return ("0123456789abcdef" * (BIG // 16 + 1))[:BIG]


@dataclass
class Load:
    times: list[float] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # one per kind of call
    wrong: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    opened: int = 0


@contextlib.asynccontextmanager
async def session(url: str) -> Any:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    # One timeout for every phase, connecting included: at 1,000 sessions this one client process
    # is starved for tens of seconds, and the SDK's 30 s connect deadline then ran out in the
    # starved client itself (ConnectTimeout, 384 of 1,000; the listening socket queues 4,096).
    http = create_mcp_http_client(timeout=httpx2.Timeout(CLIENT_TIMEOUT))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def one_session(url: str, calls: int, tag: str, load: Load, list_first: bool = True) -> None:
    async with session(url) as client:
        load.opened += 1
        if list_first:  # the listing every client makes (the SDK's own would come at the first call)
            await client.list_tools()
        for i in range(calls):
            name, args = ("big", {"chars": BIG}) if i % 8 == 7 else ("echo", {"text": f"{tag}-{i}"})
            started = time.perf_counter()
            result = await client.call_tool(name, args)
            load.times.append(time.perf_counter() - started)
            text = "".join(getattr(c, "text", "") for c in result.content)
            if result.is_error or text != expected(name, args):
                load.wrong.append(f"{name} {args}: {text[:80]!r}")
            got = comparable(result)
            if name == "echo":
                got = {**got, "content": "<checked>", "_meta": "<len>" if got.get("_meta") else None}
            load.answers.setdefault(name, got)


def cause(exc: BaseException) -> str:
    """What ended a failed session: the innermost exceptions' types (an SDK client wraps them in
    task groups' exception groups)."""
    inner = getattr(exc, "exceptions", None)  # an exception group (Python 3.11)
    if isinstance(inner, tuple) and inner:
        return "+".join(sorted({cause(e) for e in inner}))
    return type(exc).__name__


async def sessions(url: str, n: int, calls: int) -> tuple[Load, float]:
    load = Load()

    async def guarded(k: int) -> None:
        try:
            await one_session(url, calls, f"s{k}", load)
        except Exception as exc:  # counted: every session must open and answer
            load.failed.append(cause(exc))

    started = time.perf_counter()
    await asyncio.gather(*(guarded(k) for k in range(n)))
    return load, time.perf_counter() - started


async def single(url: str, name: str, args: dict[str, Any], calls: int) -> tuple[list[float], dict[str, Any]]:
    times = []
    async with session(url) as client:
        await client.list_tools()
        result = None
        for _ in range(calls + 2):
            started = time.perf_counter()
            result = await client.call_tool(name, args)
            times.append(time.perf_counter() - started)
        text = "".join(getattr(c, "text", "") for c in result.content)  # type: ignore[union-attr]
        assert text == expected(name, args), text[:80]
        return times[2:], comparable(result)


async def listing(url: str, repeats: int) -> tuple[list[float], list[str]]:
    times = []
    async with session(url) as client:
        names: list[str] = []
        for _ in range(repeats + 1):
            started = time.perf_counter()
            result = await client.list_tools()
            times.append(time.perf_counter() - started)
            names = sorted(t.name for t in result.tools)
        return times[1:], names


async def idle_sessions(side: Side, n: int) -> tuple[int, int]:
    """(sessions opened, resident KiB of the server and its upstream) with `n` sessions open and
    idle (each has listed the tools once, as the SDK client does before its first call)."""
    ready, release = asyncio.Semaphore(0), asyncio.Event()
    opened = 0

    async def hold() -> None:
        nonlocal opened
        try:
            async with session(side.url) as client:
                await client.list_tools()
                opened += 1
                ready.release()
                await release.wait()
        except Exception:
            ready.release()

    tasks = [asyncio.create_task(hold()) for _ in range(n)]
    for _ in range(n):
        await ready.acquire()
    await asyncio.sleep(1)
    rss = side.rss_kib()
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return opened, rss


# ---- the rounds ---------------------------------------------------------------------------


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


@dataclass
class Row:
    values: dict[str, list[float]] = field(default_factory=dict)  # side -> one value per round

    def add(self, side: str, value: float) -> None:
        self.values.setdefault(side, []).append(value)


def run_round(side: Side, args: argparse.Namespace, rows: dict[str, Row], answers: dict[str, Any]) -> None:
    def record(label: str, value: float) -> None:
        rows.setdefault(label, Row()).add(side.name, value)

    def check(kind: str, got: Any) -> None:
        ref = answers.setdefault(kind, {"side": side.name, "value": got})
        if ref["value"] != got:
            answers.setdefault("mismatch", []).append(
                f"{kind}: {side.name} {got!r:.300} != {ref['side']} {ref['value']!r:.300}"
            )

    times, got = asyncio.run(single(side.url, "echo", {"text": "hello"}, args.calls * 2))
    record("echo p50 ms, 1 session", statistics.median(times) * 1e3)
    got["_meta"] = got.get("_meta")
    check("echo", got)
    times, got = asyncio.run(single(side.url, "big", {"chars": BIG}, args.calls))
    record("50 KB p50 ms, 1 session", statistics.median(times) * 1e3)
    check("big", got)
    times, names = asyncio.run(listing(side.url, 10))
    record(f"tools/list of {TOOLS + 3} p50 ms", statistics.median(times) * 1e3)
    check("listing", names)
    for n in args.sessions:
        cpu = side.cpu()
        load, seconds = asyncio.run(sessions(side.url, n, args.calls))
        used = side.cpu() - cpu
        done = len(load.times)
        record(f"{n} sessions: calls/s", done / seconds)
        record(f"{n} sessions: p50 ms", pct(load.times, 0.5) * 1e3)
        record(f"{n} sessions: p99 ms", pct(load.times, 0.99) * 1e3)
        record(f"{n} sessions: CPU ms/call", used / max(done, 1) * 1e3)
        record(f"{n} sessions: failed sessions", float(len(load.failed) + n - load.opened))
        record(f"{n} sessions: wrong answers", float(len(load.wrong)))
        for kind, value in load.answers.items():
            check(f"load {kind}", value)
        if load.failed or load.wrong:
            causes = Counter(load.failed).most_common()
            print(f"  {side.name} at {n}: failed sessions by cause {causes}; wrong {load.wrong[:3]}", flush=True)


def report(rows: dict[str, Row], sides: list[str]) -> None:
    print("\nmedian over rounds [min-max]; ratios are medians of per-round ratios to toolroute's", flush=True)
    head = f"{'':34s}" + "".join(f"{s:>26s}" for s in sides)
    print(head)
    for label, row in rows.items():
        cells = []
        for s in sides:
            vals = row.values.get(s, [])
            if not vals:
                cells.append(f"{'-':>26s}")
                continue
            cell = f"{statistics.median(vals):.1f} [{min(vals):.1f}-{max(vals):.1f}]"
            if s != "toolroute" and row.values.get("toolroute"):
                ratios = [v / t for v, t in zip(vals, row.values["toolroute"], strict=False) if t]
                if ratios:
                    cell += f" {statistics.median(ratios):.2f}x"
            cells.append(f"{cell:>26s}")
        print(f"{label:34s}" + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", default="1,8,32,128", type=lambda s: [int(x) for x in s.split(",") if x])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--sides", default="direct,toolroute,mcp-proxy")
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--layers", type=Path, default=None, help="time each layer of toolroute's calls (JSON)")
    parser.add_argument("--idle", type=int, default=200, help="idle sessions held open for the memory row (0: none)")
    args = parser.parse_args()
    wanted = ["toolroute"] if args.profile or args.layers else args.sides.split(",")
    with tempfile.TemporaryDirectory(prefix="gateway-load-", dir=Path.home()) as d:
        tmp = Path(d)
        started: list[Side] = []
        try:
            for name in wanted:
                if name == "direct":
                    started.append(start_direct(tmp))
                elif name == "toolroute":
                    started.append(start_toolroute(tmp, args.profile, args.layers))
                elif name == "mcp-proxy":
                    side = start_proxy(tmp)
                    if isinstance(side, str):
                        print(f"mcp-proxy skipped: {side}", flush=True)
                    else:
                        started.append(side)
            idle = {s.name: s.rss_kib() for s in started}
            rows: dict[str, Row] = {}
            answers: dict[str, Any] = {}
            for r in range(args.rounds):
                order = started[r % len(started) :] + started[: r % len(started)]
                for side in order:
                    print(f"round {r + 1}: {side.name}", flush=True)
                    run_round(side, args, rows, answers)
            for s in started:
                print(f"{s.name}: RSS {idle[s.name]} KiB at start, {s.rss_kib()} KiB at the end (with its upstream)")
            if args.idle:
                for s in started:
                    base = s.rss_kib()
                    opened, rss = asyncio.run(idle_sessions(s, args.idle))
                    per = (rss - base) / max(opened, 1)
                    print(
                        f"{s.name}: {opened}/{args.idle} idle sessions open, {per:.0f} KiB each above the warm server"
                    )
            report(rows, [s.name for s in started])
            mismatches = answers.get("mismatch", [])
            print(f"\nanswers differing from the first side's: {len(mismatches)}")
            for m in mismatches[:10]:
                print("  " + m)
        finally:
            for s in started:
                stop(s)
    if args.layers is not None and args.layers.exists():
        print_layers(json.loads(args.layers.read_text()))


def print_layers(spans: dict[str, list[float]]) -> None:
    """Each layer's p50 over the calls (the outer ones include the inner)."""
    print("\nlayers of toolroute's calls (p50 ms over every call of the run; each includes those below it)")
    for label in sorted(spans):
        print(f"  {label:58s} {statistics.median(spans[label]) * 1e3:7.3f}  ({len(spans[label])} samples)")


if __name__ == "__main__":
    main()
