"""The search index stays true where the watch cannot see: files changed through another hard
link (inside the tree or outside it), and a same-user process forging barrier sentinels.

Each answer with the index warm is compared with the same query scanned without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _search_helpers import call, write
from test_search_index import confinement, grep_both, router_for, warm

from toolroute import _core

APPEND = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')"


def _append_from_another_process(path: Path, text: str) -> None:
    subprocess.run([sys.executable, "-c", APPEND, str(path), text], check=True, timeout=60)


def _same_answers(router: Any, pattern: str) -> Any:
    indexed, plain = grep_both(router, pattern=pattern, output_mode="files_with_matches")
    assert indexed == plain, pattern
    return indexed


@pytest.fixture(params=["inotify", "checking"])
def watch_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "checking":
        monkeypatch.setenv("TOOLROUTE_SEARCH_INDEX_WATCH", "0")
    return str(request.param)


def test_a_file_changed_through_a_link_outside_the_tree_is_found(tmp_path: Path, watch_mode: str) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    for i in range(20):
        write(root, f"d{i % 3}/f{i}.txt", f"plain text {i}\n")
    os.link(root / "d1" / "f4.txt", outside / "alias.txt")
    router = router_for(root)
    warm(root)
    for n in range(5):
        word = f"fromoutside{n}"
        _append_from_another_process(outside / "alias.txt", word)
        found = _same_answers(router, word)
        assert "d1/f4.txt" in str(found), found


def test_a_file_linked_inside_the_tree_after_the_build_is_found_through_either_name(
    tmp_path: Path, watch_mode: str
) -> None:
    root = tmp_path / "ws"
    for i in range(20):
        write(root, f"d{i % 3}/f{i}.txt", f"plain text {i}\n")
    router = router_for(root)
    warm(root)
    (root / "new").mkdir()
    os.link(root / "d0" / "f3.txt", root / "new" / "twin.txt")
    _same_answers(router, "plain")  # the new name is seen (its folder's listing changed)
    for n, through in enumerate(["new/twin.txt", "d0/f3.txt", "new/twin.txt"]):
        word = f"throughlink{n}"
        _append_from_another_process(root / through, word)
        found = str(_same_answers(router, word))
        assert "d0/f3.txt" in found and "new/twin.txt" in found, (through, found)


FORGER = r"""
import os, sys, time, secrets
folder, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < deadline and n < 200_000:
    # Old-style sequence numbers far ahead, and names shaped like the new ones.
    for name in ("b99999999999", "b" + secrets.token_hex(16), "b" + "f" * 32):
        try:
            open(os.path.join(folder, name), "w").close()
            os.remove(os.path.join(folder, name))
        except OSError:
            pass
        n += 1
"""


@pytest.mark.skipif(_core.PORTABLE, reason="the portable build has no inotify watch, so no barrier to forge")
def test_forged_barrier_sentinels_make_no_answer_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    root = tmp_path / "ws"
    for i in range(30):
        write(root, f"d{i % 4}/f{i}.txt", f"nothing here {i}\n")
    router = router_for(root)
    warm(root)
    assert _core.search_index_stats(confinement(root))["watching"]
    (barriers,) = list((cache / "toolroute").glob("barrier-*"))
    forger = subprocess.Popen([sys.executable, "-c", FORGER, str(barriers), "120"])
    stale = 0
    try:
        time.sleep(0.2)  # the forger is running
        for n in range(300):
            word = f"fresh{n}x"
            _append_directly(root / f"d{n % 4}" / f"f{n % 30}.txt", word)
            out = call(router, "grep", pattern=word, output_mode="files_with_matches")
            stale += f"f{n % 30}.txt" not in str(out)
    finally:
        forger.kill()
        forger.wait()
    assert stale == 0


def _append_directly(path: Path, text: str) -> None:
    # Written by this process but not through toolroute's tools: only the watch tells the index.
    with open(path, "a") as out:
        out.write(text + "\n")
