"""An operator's policy, metrics and traces in served mode, measured interleaved (issue 59).

    python benches/serve_operator.py [--calls 300]

Four `toolroute serve` processes on 127.0.0.1 serve the same function: plain; with a policy of
50 rules (`--policy`); with Prometheus metrics (`--metrics`); with traces exported over OTLP/HTTP
to a local receiver (`OTEL_EXPORTER_OTLP_ENDPOINT`). One client session each, calls rotating
between them, same answer checked; p50 and p99 per side and their ratio to plain.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_http import _percentile, _start_toolroute


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def _policy(folder: Path) -> Path:
    rules = [
        {"id": f"r{i}", "when": f'tool.name == "t{i}" && args.path.startsWith("/x")', "effect": "deny"}
        for i in range(49)
    ]
    rules.append({"id": "shouting", "when": 'tool.name == "shout" && args.text == "forbidden"', "effect": "deny"})
    path = folder / "policy.json"
    path.write_text(json.dumps({"default": "allow", "rules": rules}))
    return path


async def _latencies(urls: dict[str, str], calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in urls}
    names = list(urls)
    async with contextlib.AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(Client(urls[name])) for name in names}
        for client in clients.values():
            for _ in range(10):
                await client.call_tool("shout", {"text": "warm"})
        for i in range(calls):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                start = time.perf_counter()
                result = await clients[name].call_tool("shout", {"text": f"x{i}"})
                out[name].append(time.perf_counter() - start)
                assert result.content[0].text == f"X{i}", (name, result)  # like for like
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        procs = []
        try:
            urls = {}
            for name, extra, env in (
                ("plain", (), {}),
                ("policy (50 rules)", ("--policy", str(_policy(folder))), {}),
                ("metrics", ("--metrics", "127.0.0.1:0"), {}),
                ("traces", (), {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}"}),
            ):
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    proc, url = _start_toolroute(folder, *extra)
                finally:
                    for k, v in saved.items():
                        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                procs.append(proc)
                urls[name] = url
            lat = anyio.run(_latencies, urls, args.calls)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=15)
            sink.shutdown()
    print(f"HTTP tool call, {args.calls} interleaved calls each (ms), ratio to plain:")
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        base = _percentile(lat["plain"], q)
        cells = [f"{name} {_percentile(v, q) * 1e3:.3f} ({_percentile(v, q) / base:.3f}x)" for name, v in lat.items()]
        print(f"  {label}: " + "  ".join(cells))


if __name__ == "__main__":
    main()
