"""What a served tenant gets while others attack the server's shared parts (issue 40), interleaved.

    python benches/serve_fairness.py [--rounds 8] [--calls 25] [--old-python PATH]

One `toolroute serve` over HTTP with API keys (SQLite registry, workspaces in a temporary folder
outside /tmp). A victim tenant makes `--calls` calls a round, one after another, each a sync tool
that runs on a worker thread (`shout`, declared `quick=False`). Rounds alternate between:

- **quiet**: nobody else calls;
- **holders**: five other tenants keep eight calls each running (a sync tool that sleeps 2 s:
  forty calls, every worker thread of the pool);
- **leavers**: another tenant keeps starting long greps (multiline, 40 MiB of matching lines)
  and leaving each after 0.1 s (its client disconnects).

Reported: the victim's p50 and p99 per condition, and each attack's ratio against quiet (1.0:
the attack costs the victim nothing). With `--old-python`, the interpreter of another build
(a virtual environment with that build installed): a second server of that build, and the
victim's calls alternating between the two servers (no attack), as the cost of this build's
new limits on a normal served call: old p50 / new p50; with `--attack-old` too, the attacks
again on the old build's server (what a victim got before).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOLS = textwrap.dedent(
    '''
    import time
    from toolroute import function_tool

    @function_tool(quick=False)
    def shout(text: str) -> str:
        """Upper-case a text (on a worker thread)."""
        return text.upper()

    @function_tool(quick=False)
    def hold(seconds: float) -> str:
        """Hold a worker thread."""
        time.sleep(min(seconds, 10.0))
        return "held"
    '''
)
HOLDERS = [f"holder{n}" for n in range(5)]
USERS = ["victim", "leaver", *HOLDERS]
LINE = b"kaouhe keg sa ipkb hvcdzdh wt nrsa vjzc qoh mlre tixz plue aaqk\n"
LONG_GREP = {"pattern": r"(\w+\s+){6}\w*q", "multiline": True}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _outside_tmp() -> Path:
    for base in ("/var/tmp", str(Path.home())):
        if Path(base).is_dir():
            folder = Path(tempfile.mkdtemp(prefix="toolroute-fair-", dir=base))
            folder.chmod(0o755)
            return folder
    raise RuntimeError("no folder outside /tmp")


def _start(python: str, folder: Path, store: str, *, seed: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(folder), "TOOLROUTE_SEARCH_INDEX": "0"}
    cmd = [python, "-m", "toolroute", "serve", "--transport", "http", "--port", "0", "--api-keys"]
    cmd += ["--store", store, "--modules", "fair_tools", "--functions", "shout,hold,grep"]
    cmd += ["--workspace-template", str(folder / "ws" / "{user}"), "--sandbox", "auto", "--recycle-above", "0"]
    cmd += ["--calls-per-minute", "1000000"]  # the victim measures: no rate limit in its way
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        if " on http://" in line:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
            return proc, line.rsplit(" on ", 1)[1].strip()
    raise RuntimeError(f"{python}: toolroute serve did not start")


def _session(url: str, key: str) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    return http, Client(streamable_http_client(url, http_client=http))


class Attack:
    """An attack running in its own thread while the victim measures."""

    def __init__(self, url: str, keys: dict[str, str], kind: str) -> None:
        self.url, self.keys, self.kind = url, keys, kind
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: anyio.run(self._run), daemon=True)
        self.ready = threading.Event()

    def __enter__(self) -> Attack:
        self._thread.start()
        self.ready.wait(60)
        time.sleep(0.5)  # the attack in full swing
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)

    async def _run(self) -> None:
        async with anyio.create_task_group() as group:
            if self.kind == "holders":
                for user in HOLDERS:
                    for _ in range(8):
                        group.start_soon(self._hold, user)
            else:
                group.start_soon(self._leave)
            self.ready.set()
            while not self._stop.is_set():
                await anyio.sleep(0.05)
            group.cancel_scope.cancel()

    async def _hold(self, user: str) -> None:
        http, client = _session(self.url, self.keys[user])
        async with http, client:
            while not self._stop.is_set():
                await client.call_tool("hold", {"seconds": 2})

    async def _leave(self) -> None:
        while not self._stop.is_set():
            http, client = _session(self.url, self.keys["leaver"])
            with anyio.move_on_after(0.1):
                async with http, client:
                    await client.call_tool("grep", LONG_GREP)


async def _victim(url: str, key: str, calls: int) -> list[float]:
    http, client = _session(url, key)
    out = []
    async with http, client:
        for i in range(calls):
            start = time.perf_counter()
            result = await client.call_tool("shout", {"text": f"v{i}"})
            out.append(time.perf_counter() - start)
            assert result.content[0].text == f"V{i}", result  # served, and right
    return out


def _users(store: str) -> dict[str, str]:
    from toolroute.serve.store import UserStore

    with UserStore(store) as registry:
        keys = {}
        for user in USERS:
            registry.add_user(user)
            keys[user] = registry.add_key(user)
    return keys


def bench_attacks(rounds: int, calls: int, python: str = sys.executable) -> None:
    folder = _outside_tmp()
    try:
        (folder / "fair_tools.py").write_text(TOOLS)
        store = f"sqlite:///{folder / 'users.db'}"
        keys = _users(store)
        proc, url = _start(python, folder, store)
        try:
            anyio.run(_victim, url, keys["victim"], 5)  # the victim's workspace and door exist
            anyio.run(_victim, url, keys["leaver"], 1)
            (folder / "ws" / "leaver" / "big.txt").write_bytes(LINE * ((40 << 20) // len(LINE)))
            times: dict[str, list[float]] = {"quiet": [], "holders": [], "leavers": []}
            ratios: dict[str, list[float]] = {"holders": [], "leavers": []}
            for r in range(rounds):
                for kind in ("holders", "leavers"):
                    order = ("quiet", kind) if r % 2 == 0 else (kind, "quiet")
                    got: dict[str, list[float]] = {}
                    for condition in order:
                        if condition == "quiet":
                            got[condition] = anyio.run(_victim, url, keys["victim"], calls)
                        else:
                            with Attack(url, keys, condition):
                                got[condition] = anyio.run(_victim, url, keys["victim"], calls)
                    for condition, values in got.items():
                        times[condition].extend(values)
                    ratios[kind].append(statistics.median(got[kind]) / statistics.median(got["quiet"]))
                print(f"  round {r + 1}/{rounds} done", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"victim's calls under attack ({python}), {rounds} interleaved rounds of {calls} calls (ms):")
    for condition, values in times.items():
        print(f"  {condition}: p50 {_percentile(values, 0.5) * 1e3:.2f}  p99 {_percentile(values, 0.99) * 1e3:.2f}")
    for kind in ("holders", "leavers"):
        p50 = _percentile(times[kind], 0.5) / _percentile(times["quiet"], 0.5)
        p99 = _percentile(times[kind], 0.99) / _percentile(times["quiet"], 0.99)
        spread = statistics.quantiles(ratios[kind], n=4) if len(ratios[kind]) > 1 else ratios[kind] * 3
        print(
            f"  {kind} / quiet: p50 {p50:.2f}x, p99 {p99:.2f}x; per-round median ratio "
            f"{statistics.median(ratios[kind]):.2f} [{spread[0]:.2f}-{spread[-1]:.2f}]"
        )


async def _alternate(urls: dict[str, str], keys: dict[str, dict[str, str]], calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in urls}
    sessions = {name: _session(url, keys[name]["victim"]) for name, url in urls.items()}
    async with sessions["old"][0], sessions["old"][1] as old, sessions["new"][0], sessions["new"][1] as new:
        clients = {"old": old, "new": new}
        for client in clients.values():
            for _ in range(20):
                await client.call_tool("shout", {"text": "warm"})
        for i in range(calls):
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                start = time.perf_counter()
                result = await clients[name].call_tool("shout", {"text": f"x{i}"})
                out[name].append(time.perf_counter() - start)
                assert result.content[0].text == f"X{i}", (name, result)  # like for like
    return out


def bench_builds(old_python: str, calls: int) -> None:
    folders = {name: _outside_tmp() for name in ("old", "new")}
    procs = []
    try:
        urls, keys = {}, {}
        for name, folder in folders.items():
            (folder / "fair_tools.py").write_text(TOOLS)
            store = f"sqlite:///{folder / 'users.db'}"
            keys[name] = _users(store)
            proc, urls[name] = _start(old_python if name == "old" else sys.executable, folder, store)
            procs.append(proc)
        lat = anyio.run(_alternate, urls, keys, calls)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
    print(f"a normal served call, the old build against this one, {calls} interleaved calls each (ms):")
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        a, b = _percentile(lat["old"], q) * 1e3, _percentile(lat["new"], q) * 1e3
        print(f"  {label}: old {a:.3f}  new {b:.3f}  ratio old/new {a / b:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=25)
    parser.add_argument("--old-python", help="the python of a virtual environment with another build installed")
    parser.add_argument("--attack-old", action="store_true", help="also attack the --old-python build's server")
    args = parser.parse_args()
    bench_attacks(args.rounds, args.calls)
    if args.old_python and args.attack_old:
        bench_attacks(args.rounds, args.calls, args.old_python)
    if args.old_python:
        bench_builds(args.old_python, args.calls * 20)


if __name__ == "__main__":
    main()
