"""Two builds of toolroute side by side: is a change (a redesign, a refactor) slower anywhere?

    python benches/ab_builds.py --old /path/to/old/site-packages [--new /path/to/new/site] [--rounds 15]

`--old` is a folder holding another build's `toolroute` package (for example a wheel of an earlier
commit unpacked there: `maturin build --release -o dist` in a worktree of that commit, then
`unzip dist/*.whl -d old-site`); the new build is the one this interpreter imports, or the one in
`--new` (built the same way, so both are release builds). Each build runs in a worker process of
its own; the driver alternates them round by round (interleaved, so drift
hits both), each round timing the same calls on the same files, and checks both give the same
answers. Reported: per workload, the median over rounds of old time / new time (above 1: the new
build is faster) and its spread (the quartiles of the rounds' ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import json, sys, time
from pathlib import Path
from toolroute import BuiltInToolContext, ToolRouter, function_tool

@function_tool(name="echo", description="echo")
def echo(text: str) -> str:
    return text

# Two workspaces, used in turn (the driver says which): a workload that writes is slower in one
# folder than in another on the same disk (an A/A run showed 0.7x), so each build writes in both.
routers = [ToolRouter(context=BuiltInToolContext(Path(folder))) for folder in sys.argv[1:3]]
for router in routers:
    router.register(echo)
CALLS = {
    "invoke_function": ("echo", '{"text": "hello"}'),
    "read_file_page": ("read_file", '{"path": "big.py", "offset": 50, "limit": 100}'),
    "read_file_small": ("read_file", '{"path": "small.txt"}'),
    "grep_tree": ("grep", '{"pattern": "needle_[0-9]+", "path": "tree"}'),
    "glob_tree": ("glob", '{"pattern": "**/*.py", "path": "tree", "sort": "path"}'),
}
PATCH = (
    "*** Begin Patch\n*** Update File: big.py\n@@ def f20(x):\n"
    "-    return x + {a}  # line 20\n+    return x + {b}  # line 20\n*** End Patch\n"
)


PATCH_20 = "*** Begin Patch\n" + "".join(
    f"*** Update File: many/m{i:02}.py\n@@ def f20():\n-    return {{a}}\n+    return {{b}}\n" for i in range(20)
) + "*** End Patch\n"


def v4a(a, b):
    # A native apply_patch_call's form: V4A operations (OpenAI's apply_patch tool type).
    diff = f"@@ def f40(x):\n-    return x + {a}  # line 40\n+    return x + {b}  # line 40\n"
    return ("apply_patch", json.dumps({"operations": [{"type": "update_file", "path": "big.py", "diff": diff}]}))


def edit(a, b):
    old, new = f"return x + {a}  # line 30\n", f"return x + {b}  # line 30\n"
    return ("edit", json.dumps({"path": "big.py", "old_string": old, "new_string": new}))


# Workloads that change the file undo themselves: each call alternates a change and its reverse.
TOGGLES = {
    "apply_patch_1_hunk": [
        ("apply_patch", json.dumps({"patch": PATCH.format(a=a, b=b)})) for a, b in ((20, 21), (21, 20))
    ],
    "edit_unique": [edit(30, 31), edit(31, 30)],
    "apply_patch_v4a": [v4a(40, 41), v4a(41, 40)],
    "apply_patch_20_files": [
        ("apply_patch", json.dumps({"patch": PATCH_20.format(a=a, b=b)})) for a, b in ((20, 21), (21, 20))
    ],
}
# A served call: an MCP session over the SDK's in-memory transport to `toolroute serve`'s server
# (session start included, the same in both builds).
SERVED = {"served_read_file": ("read_file", {"path": "small.txt"})}
served_servers = {}


def served(router, name, n):
    import anyio
    from mcp import Client
    from toolroute.serve import ServedTools, build_server

    tool, arguments = SERVED[name]
    if id(router) not in served_servers:
        served_servers[id(router)] = build_server(ServedTools(router, [tool]))
    served_server = served_servers[id(router)]

    async def session(count):
        async with Client(served_server) as client:
            text = None
            for _ in range(count):
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result
                text = result.content[0].text
            return text

    anyio.run(session, 1)
    started = time.perf_counter()
    answer = anyio.run(session, n)
    return time.perf_counter() - started, answer


# What one request is shown, assembled (the same convenience form in both builds): the eight
# built-ins, as `get_all_tools` lists them and as an adapter's allowlist with an approval rule.
BUILTINS = ["bash", "read_file", "write_file", "apply_patch", "glob", "grep", "edit", "update_agents_md"]


def exposed(router, name, n):
    from toolroute.allowlist import ExposedTools

    if name == "get_all_tools_builtins":
        make = lambda: [t["function"]["name"] for t in router.get_all_tools(BUILTINS)]  # noqa: E731
    else:
        make = lambda: ExposedTools(router, BUILTINS, needs_approval=["bash"]).names  # noqa: E731
    answer = make()
    started = time.perf_counter()
    for _ in range(n):
        make()
    return time.perf_counter() - started, answer


for line in sys.stdin:
    name, n, side = line.split()
    router = routers[int(side)]
    if name in ("get_all_tools_builtins", "exposed_tools_builtins"):
        elapsed, answer = exposed(router, name, int(n))
        print(json.dumps({"seconds": elapsed, "answer": answer}), flush=True)
        continue
    if name in SERVED:
        elapsed, answer = served(router, name, int(n))
        print(json.dumps({"seconds": elapsed, "answer": answer}), flush=True)
        continue
    calls = TOGGLES.get(name) or [CALLS[name]]
    answer = router.invoke(*calls[0])
    if len(calls) > 1:
        router.invoke(*calls[1])
    started = time.perf_counter()
    for i in range(int(n)):
        router.invoke(*calls[i % len(calls)])
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "answer": answer}), flush=True)
"""

# calls per round: each round takes a few tens of milliseconds per side
WORKLOADS = {
    "invoke_function": 4000,
    "read_file_page": 600,
    "read_file_small": 1500,
    "grep_tree": 40,
    "glob_tree": 60,
    "apply_patch_1_hunk": 200,
    "apply_patch_v4a": 200,
    "edit_unique": 200,
    "apply_patch_20_files": 20,
    "served_read_file": 300,
    "get_all_tools_builtins": 300,
    "exposed_tools_builtins": 300,
}


def make_workspace(root: Path) -> None:
    (root / "big.py").write_text("".join(f"def f{i}(x):\n    return x + {i}  # line {i}\n" for i in range(1500)))
    (root / "small.txt").write_text("one\ntwo\nthree\n")
    (root / "many").mkdir()
    for i in range(20):
        (root / "many" / f"m{i:02}.py").write_text("".join(f"def f{n}():\n    return {n}\n" for n in range(40)))
    for d in range(20):
        folder = root / "tree" / f"pkg{d}"
        folder.mkdir(parents=True)
        for f in range(25):
            body = "".join(f"value_{k} = {k}\n" for k in range(40))
            if (d * 25 + f) % 7 == 0:
                body += f"needle_{d}_{f} = True\n"
            (folder / f"mod{f}.py").write_text(body)


class Worker:
    def __init__(self, label: str, site: str | None, spaces: list[Path]) -> None:
        env = dict(os.environ)
        if site is not None:
            env["PYTHONPATH"] = site  # before the editable install's path entry
        self.label = label
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, *map(str, spaces)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, workload: str, n: int, side: int) -> tuple[float, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{workload} {n} {side}\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["seconds"], reply["answer"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="folder holding the other build's toolroute package")
    parser.add_argument("--new", help="folder holding this build's toolroute package (default: the one imported)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="run only these workloads")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # Two workspaces; in a round each build uses the other one (the workloads that change
        # files never meet), and they swap every round, so neither build keeps the faster one.
        spaces = [Path(tmp) / name for name in ("a", "b")]
        for ws in spaces:
            ws.mkdir()
            make_workspace(ws)
        old, new = Worker("old", args.old, spaces), Worker("new", args.new, spaces)
        try:
            print(f"{'workload':<20} {'old/new':>8} {'spread':>12} {'old ms':>9} {'new ms':>9}")
            for workload, n in WORKLOADS.items():
                if args.only and workload not in args.only:
                    continue
                ratios, olds, news = [], [], []
                for r in range(args.rounds):
                    pair = (old, new) if r % 2 == 0 else (new, old)
                    sides = {"old": (r // 2) % 2, "new": 1 - (r // 2) % 2}
                    times = {}
                    answers = {}
                    for w in pair:
                        times[w.label], answers[w.label] = w.run(workload, n, sides[w.label])
                    if answers["old"] != answers["new"]:
                        raise SystemExit(f"{workload}: the builds answer differently:\n{answers}")
                    ratios.append(times["old"] / times["new"])
                    olds.append(times["old"] * 1000 / n)
                    news.append(times["new"] * 1000 / n)
                # The spread: the middle half of the rounds' ratios (quartiles).
                low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
                print(
                    f"{workload:<20} {statistics.median(ratios):>7.2f}x {low:>6.2f}-{high:.2f}x "
                    f"{statistics.median(olds):>9.4f} {statistics.median(news):>9.4f}"
                )
        finally:
            old.close()
            new.close()


if __name__ == "__main__":
    main()
