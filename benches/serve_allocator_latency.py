"""What served mode's allocator settings cost a call (issue 62), measured interleaved.

    python benches/serve_allocator_latency.py [--rounds 5] [--calls 600]

Two `toolroute serve` processes over streamable HTTP serve the same function: one with served
mode's default (glibc's thread caches and fast bins off: `GLIBC_TUNABLES=glibc.malloc.tcache_count=0`
at the re-exec, `mallopt(M_MXFAST, 0)` at start), one with glibc's defaults named
(`glibc.malloc.tcache_count=7:glibc.malloc.mxfast=128`, which served mode keeps). One client
session each, calls alternating in rotated order (serve_operator's `_latencies`), every answer
checked; per round the p50 and p99 of each side and the server's CPU time per call (from /proc), as ratios off / on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from pathlib import Path

from serve_http import _start_toolroute
from serve_operator import _latencies

GLIBC_DEFAULTS = "glibc.malloc.tcache_count=7:glibc.malloc.mxfast=128"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "off").mkdir()
        (Path(folder) / "on").mkdir()
        off, off_url = _start_toolroute(Path(folder) / "off")
        saved = os.environ.get("GLIBC_TUNABLES")
        os.environ["GLIBC_TUNABLES"] = GLIBC_DEFAULTS
        try:
            on, on_url = _start_toolroute(Path(folder) / "on")
        finally:
            if saved is None:
                os.environ.pop("GLIBC_TUNABLES")
            else:
                os.environ["GLIBC_TUNABLES"] = saved
        servers = {"caches off": off, "caches on": on}
        try:
            p50s, cpus = [], []
            for round_ in range(args.rounds):
                before = {name: _cpu_seconds(proc.pid) for name, proc in servers.items()}
                times = asyncio.run(_latencies({"caches off": off_url, "caches on": on_url}, args.calls))
                cpu = {name: (_cpu_seconds(proc.pid) - before[name]) / args.calls for name, proc in servers.items()}
                p50 = {name: statistics.median(values) for name, values in times.items()}
                p99 = {name: sorted(values)[int(0.99 * len(values))] for name, values in times.items()}
                p50s.append(p50["caches off"] / p50["caches on"])
                cpus.append(cpu["caches off"] / cpu["caches on"])
                print(
                    f"round {round_}: p50 {p50['caches off'] * 1e3:.2f} / {p50['caches on'] * 1e3:.2f} ms"
                    f" ({p50s[-1]:.3f}x), p99 {p99['caches off'] * 1e3:.2f} / {p99['caches on'] * 1e3:.2f} ms,"
                    f" server CPU per call {cpu['caches off'] * 1e3:.2f} / {cpu['caches on'] * 1e3:.2f} ms"
                    f" ({cpus[-1]:.3f}x)",
                    flush=True,
                )
            print(f"off / on, median of rounds: p50 {statistics.median(p50s):.3f}x, CPU {statistics.median(cpus):.3f}x")
        finally:
            for proc in servers.values():
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
