"""The index's settings have one home (rust/search/src/index/config.rs): a host sets a default
in-process (`_core.set_search_index_default`; served mode its idle timeout) and the operator's
`TOOLROUTE_SEARCH_INDEX_*` variable still wins; a setting that does not exist, or a value that
cannot be one, is refused by name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolroute import ToolArgumentError
from toolroute._core import set_search_index_default


@pytest.mark.parametrize(("name", "value"), [("nope", 1.0), ("ttl", -1.0), ("memory", float("nan"))])
def test_a_bad_setting_is_refused_by_name(name: str, value: float) -> None:
    with pytest.raises(ToolArgumentError, match="index setting"):
        set_search_index_default(name, value)


CHILD = """
import sys
from pathlib import Path
from toolroute._core import set_search_index_default
set_search_index_default("ttl", 0)  # unused indexes go at once
root = Path(sys.argv[1])
(root / "a.txt").write_text("needle\\n")
import time
from toolroute._core import Confinement, search_index_stats, search_index_warm
conf = Confinement(root)
assert search_index_warm(conf, timeout=60)
deadline = time.monotonic() + 3  # with a TTL of 0 it goes within a sweep or two
while search_index_stats(conf)["state"] != "none" and time.monotonic() < deadline:
    time.sleep(0.05)
print(search_index_stats(conf)["state"])
"""


@pytest.mark.parametrize(("env", "state"), [({}, "none"), ({"TOOLROUTE_SEARCH_INDEX_TTL": "600"}, "ready")])
def test_a_default_applies_and_the_variable_wins(tmp_path: object, env: dict[str, str], state: str) -> None:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("TOOLROUTE_SEARCH_INDEX")} | env
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], env=full, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == state


QUICK_SCANS = """
import os, sys, time
from pathlib import Path
from toolroute import BuiltInToolContext, ToolRouter
from toolroute._core import search_index_stats
base = Path(sys.argv[1])
threads = len(os.listdir("/proc/self/task"))
states = []
for i in range(20):  # twenty users' one-file workspaces, each searched five times
    root = base / f"u{i}"
    root.mkdir()
    (root / "note.txt").write_text(f"secret {i}\\n")
    context = BuiltInToolContext(root)
    router = ToolRouter(context=context)
    for _ in range(5):
        assert f"secret {i}" in router.invoke("grep", {"pattern": f"secret {i}", "output_mode": "content"})
    time.sleep(0.05)
    states.append(search_index_stats(context.confinement)["state"])
print(sorted(set(states)), len(os.listdir("/proc/self/task")) - threads)
"""


@pytest.mark.parametrize(("min_scan", "indexed"), [(None, False), ("0", True)])
def test_trees_scanned_quickly_are_not_indexed(tmp_path: object, min_scan: str | None, indexed: bool) -> None:
    """An index holds two threads and their memory; a tree whose scan takes under `min_scan`
    (default 2 ms: a served user's one-file workspace) gains nothing from one, so its scans never
    start one. With the setting at 0, the second scan starts one, as before."""
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("TOOLROUTE_SEARCH_INDEX")}
    full["TOOLROUTE_SEARCH_INDEX_CACHE"] = "0"
    if min_scan is not None:
        full["TOOLROUTE_SEARCH_INDEX_MIN_SCAN"] = min_scan
    done = subprocess.run(
        [sys.executable, "-c", QUICK_SCANS, str(tmp_path)], env=full, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    states, threads = done.stdout.split("]")
    if indexed:
        assert "'none'" not in states and int(threads) >= 20, done.stdout
    else:
        assert states == "['none'" and int(threads) == 0, done.stdout
