"""A keyed tenant's calls on new connections while an unauthenticated flood holds partial request
heads from one address (issues 55, 56), interleaved with quiet rounds.

    python benches/serve_admission.py [--rounds 6] [--calls 10] [--flood 300]

One `toolroute serve` over HTTP with API keys (SQLite registry in a temporary folder). Each round
has two halves in alternating order: **quiet** (the tenant alone) and **flood** (`--flood`
connections from 127.0.0.2, each sending a partial request head and then nothing, reopened as
soon as the server closes one; the tenant's calls start once the flood's connections are old
enough to count as stalled). In both, the tenant makes `--calls` calls one after another, each on
a new connection and session (initialize, then `echo`), and every answer is checked. Reported:
p50 and p99 of the tenant's calls per condition, calls that failed, and the ratio flood / quiet
(1.0: the flood costs the tenant nothing). Before issue 55's admission, a tenant's calls on new
connections went 0 of 10 under this flood.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOLS = textwrap.dedent(
    '''
    from toolroute import function_tool

    @function_tool
    def echo(text: str) -> str:
        """Echo a text."""
        return text
    '''
)
PARTIAL_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
SETTLE = 3.0  # seconds a flood runs before the tenant's calls: its connections are stalled by then


class Flood:
    """`count` connections from `source` holding partial heads, reopened as soon as closed."""

    def __init__(self, address: tuple[str, int], count: int, source: str = "127.0.0.2") -> None:
        self.address, self.count, self.source = address, count, source
        self.opened = self.cut = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        peers: dict[int, socket.socket] = {}
        poll = select.poll()
        try:
            while not self._stop.is_set():
                while len(peers) < self.count and not self._stop.is_set():
                    try:
                        peer = socket.create_connection(self.address, timeout=2, source_address=(self.source, 0))
                        peer.sendall(PARTIAL_HEAD)
                    except OSError:
                        time.sleep(0.01)
                        break
                    peer.setblocking(False)
                    self.opened += 1
                    peers[peer.fileno()] = peer
                    poll.register(peer, select.POLLIN)
                for fd, _ in poll.poll(50):
                    peer = peers.pop(fd)
                    poll.unregister(fd)
                    peer.close()
                    self.cut += 1
        finally:
            for peer in peers.values():
                peer.close()


async def _call(url: str, key: str, text: str) -> bool:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool("echo", {"text": text})
        return not result.is_error and "".join(getattr(c, "text", "") for c in result.content) == text


def _calls(url: str, key: str, count: int) -> tuple[list[float], int]:
    """Seconds per answered call, and the calls that failed."""
    times, failed = [], 0
    for n in range(count):
        start = time.perf_counter()
        try:
            answered = anyio.run(_call, url, key, f"call {n}")
        except Exception:  # a refused connection: counted
            answered = False
        if answered:
            times.append(time.perf_counter() - start)
        else:
            failed += 1
    return times, failed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--flood", type=int, default=300)
    args = parser.parse_args()

    from toolroute.serve.store import UserStore

    folder = Path(tempfile.mkdtemp(prefix="toolroute-admission-"))
    try:
        (folder / "bench_admission_tools.py").write_text(TOOLS)
        store_url = f"sqlite:///{folder / 'users.db'}"
        with UserStore(store_url) as store:
            store.add_user("tenant")
            key = store.add_key("tenant")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
        command = [
            *(sys.executable, "-m", "toolroute", "serve", "--transport", "http", "--port", "0"),
            *("--modules", "bench_admission_tools", "--functions", "echo", "--api-keys", "--store", store_url),
            *("--recycle-above", "0", "--calls-per-minute", "100000"),
        ]
        server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stderr is not None
            url = ""
            while " on http://" not in url:
                url = server.stderr.readline()
                if not url:
                    sys.exit(f"the server did not start: {server.wait()}")
            url = url.rsplit(" on ", 1)[1].strip()
            threading.Thread(target=lambda: server.stderr.read() if server.stderr else None, daemon=True).start()
            host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
            address = (host, int(port))
            _calls(url, key, 2)  # warm
            times: dict[str, list[float]] = {"quiet": [], "flood": []}
            failed = {"quiet": 0, "flood": 0}
            p50_ratios = []
            for r in range(args.rounds):
                round_p50 = {}
                for condition in ("quiet", "flood") if r % 2 == 0 else ("flood", "quiet"):
                    with Flood(address, args.flood) if condition == "flood" else contextlib.nullcontext() as flood:
                        if flood is not None:
                            deadline = time.monotonic() + 60
                            while flood.opened < args.flood and time.monotonic() < deadline:
                                time.sleep(0.05)
                            time.sleep(SETTLE)
                        got, lost = _calls(url, key, args.calls)
                    times[condition] += got
                    failed[condition] += lost
                    round_p50[condition] = statistics.median(got) if got else float("nan")
                p50_ratios.append(round_p50["flood"] / round_p50["quiet"])
                quiet_ms, flood_ms = round_p50["quiet"] * 1e3, round_p50["flood"] * 1e3
                print(f"round {r + 1}: quiet p50 {quiet_ms:.1f} ms, flood p50 {flood_ms:.1f} ms")
            for condition in ("quiet", "flood"):
                got = times[condition]
                print(
                    f"{condition}: p50 {_pct(got, 0.5) * 1e3:.1f} ms, p99 {_pct(got, 0.99) * 1e3:.1f} ms, "
                    f"{len(got)} answered, {failed[condition]} failed"
                )
            low, high = statistics.quantiles(p50_ratios, n=4)[0::2] if len(p50_ratios) > 1 else (p50_ratios[0],) * 2
            print(
                f"flood / quiet, p50 per round: {statistics.median(p50_ratios):.2f}x [{low:.2f}-{high:.2f}]; "
                f"p99 {_pct(times['flood'], 0.99) / _pct(times['quiet'], 0.99):.2f}x"
            )
        finally:
            server.terminate()
            server.wait(30)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
