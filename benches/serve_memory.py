"""Served memory back to base after a crowd leaves, without a recycle, per allocator (issue 62).

    python benches/serve_memory.py [--users 500] [--seconds 20] [--rounds 2] [--clients 4]
                                   [--choice NAME=ENV ...]

Every round runs one `toolroute serve` per allocator choice, in an order rotated per round (the
same machine load then hits every choice alike), each started with `--recycle-above 0` (never
recycled: what is measured is what the process gives back by itself). Each: a warm base (one
user served and released first), then `--users` users (each with an upstream server of its own)
connect at once through the real `mcp` client, call for `--seconds` (every answer checked to be
the user's own; one client process is killed mid-run), and leave; the resident memory is read
after the idle release and again a minute later (when the rate counters are pruned too).
Reported per choice: the warm base, what is kept a minute after the release over that base
(MB and as a share of the base: issue 62's target is within 10%), with the spread over rounds.

The default choices: `pymalloc` (Python's default allocator over glibc's malloc: what
`PYTHONMALLOC=pymalloc` gives), `malloc` (served mode's default: `PYTHONMALLOC=malloc`, every
Python object from glibc's malloc, trimmed at the release, no thread caches nor fast bins),
`malloc-cached` (the same with glibc's caches of freed blocks at their default sizes).
`--choice NAME=VAR=VALUE[,VAR=VALUE]` adds others,
e.g. `--choice jemalloc=PYTHONMALLOC=malloc,LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from load_serve import CLIENT, crowd, free_port, sample_all, start_server, start_upstream

CHOICES = {
    "pymalloc": {"PYTHONMALLOC": "pymalloc"},
    "malloc": {"PYTHONMALLOC": "malloc"},
    # glibc's defaults named, so served mode keeps them (serve/allocator.py, serve/heap.py)
    "malloc-cached": {
        "PYTHONMALLOC": "malloc",
        "GLIBC_TUNABLES": "glibc.malloc.tcache_count=7:glibc.malloc.mxfast=128",
    },
}


def _choice(text: str) -> tuple[str, dict[str, str]]:
    name, _, assignments = text.partition("=")
    env = dict(item.split("=", 1) for item in assignments.split(",") if item)
    return name, env


def one_run(
    base: Path, store_url: str, users: list[tuple[str, int, str]], env: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    """One server under `env`: its warm base, and its memory after the crowd's release."""
    server, url = start_server(base, store_url, args.idle_timeout, "serve-0", env, ["--recycle-above", "0"])
    try:
        time.sleep(1.0)
        warm = subprocess.run(
            [sys.executable, "-c", CLIENT, url, "2"],
            input=json.dumps([users[-1]]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if warm.returncode != 0:
            raise SystemExit(f"the warm-up client failed: {warm.stderr[-2000:]}")
        time.sleep(args.idle_timeout * 1.25 + 2.0)  # and released again
        at_start = sample_all([server.pid])
        crowd_args = argparse.Namespace(**{**vars(args), "connected": len(users) - 1, "own_servers": True})
        connected, outcomes, _, after, released, minute = crowd(url, [server.pid], users[:-1], 0, crowd_args)
        wrong = sum(len(o["wrong"]) for o in outcomes)
        calls = sum(o["calls"] for o in outcomes)
        if wrong or not calls:  # like for like: every choice served the crowd, and right
            errors = [e for o in outcomes for e in o["errors"]][:3]
            raise SystemExit(
                f"{wrong} wrong answers, {calls} calls under {env} ({errors}): the memory says nothing then"
            )
        return {
            "base_kib": at_start["rss_kib"],
            "connected_kib": connected["rss_kib"],
            "left_kib": after["rss_kib"],
            "released_kib": released["rss_kib"],
            "minute_kib": minute["rss_kib"],
            "calls": calls,
            "errors": sum(len(o["errors"]) for o in outcomes),
        }
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}"
    q = statistics.quantiles(values, n=4, method="inclusive")
    return f"{statistics.median(values):.1f} [{q[0]:.1f}-{q[2]:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--idle-timeout", type=float, default=8.0)
    parser.add_argument("--choice", action="append", default=[], metavar="NAME=VAR=VALUE[,VAR=VALUE]")
    parser.add_argument("--only", action="append", default=[], help="run only these choices (by name)")
    args = parser.parse_args()
    choices = {**CHOICES, **dict(_choice(c) for c in args.choice)}
    if args.only:
        choices = {name: env for name, env in choices.items() if name in args.only}
    from toolroute.serve.store import UserStore

    base = Path(tempfile.mkdtemp(prefix="toolroute-memory-", dir="/var/tmp"))  # a sandbox replaces /tmp
    base.chmod(0o711)
    port = free_port()
    upstream = start_upstream(port)
    try:
        os.environ["XDG_CONFIG_HOME"] = str(base / "config")
        store_url = f"sqlite:///{base / 'users.db'}"
        users: list[tuple[str, int, str]] = []
        with UserStore(store_url) as store:
            for n in range(args.users + 1):  # the last one warms each server up
                user = f"u{n:04d}"
                store.add_user(user)
                store.add_server(user, "mine", {"url": f"http://127.0.0.1:{port}/mcp"})
                users.append((user, n, store.add_key(user)))
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in choices}
        names = list(choices)
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                run = one_run(base, store_url, users, choices[name], args)
                results[name].append(run)
                kept = run["minute_kib"] - run["base_kib"]
                print(
                    f"round {r + 1} {name}: base {run['base_kib'] / 1024:.1f} MB, connected "
                    f"{run['connected_kib'] / 1024:.1f}, after the release {run['released_kib'] / 1024:.1f}, "
                    f"a minute later {run['minute_kib'] / 1024:.1f} (kept {kept / 1024:+.1f} MB, "
                    f"{100 * kept / run['base_kib']:.1f}% of the base); {run['calls']} calls, "
                    f"{run['errors']} session errors",
                    flush=True,
                )
        print(f"{args.users} users, {args.rounds} rounds interleaved; median [25th-75th percentile]:")
        for name, runs in results.items():
            kept_mb = [(r["minute_kib"] - r["base_kib"]) / 1024 for r in runs]
            share = [100 * (r["minute_kib"] - r["base_kib"]) / r["base_kib"] for r in runs]
            print(
                f"  {name:<10} base {_spread([r['base_kib'] / 1024 for r in runs])} MB; kept a minute after the "
                f"release {_spread(kept_mb)} MB = {_spread(share)}% of the base"
            )
    finally:
        upstream.terminate()
        upstream.wait(10)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
