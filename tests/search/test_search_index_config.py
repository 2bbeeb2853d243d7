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
