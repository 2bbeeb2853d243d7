"""The file texts the search index keeps in memory for the candidate scan
(rust/search/src/index/texts.rs) are used, bounded by their budget, and never make an answer
stale: a file rewritten in place at the same size, by this process or another, or rewritten
again and again while queries run, gives the answer an unindexed scan gives, with the watch and
with the checking index alike.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _search_helpers import call, write
from test_search_index import confinement, grep_both, router_for, warm
from test_search_index_truth import watch_mode

from toolroute import _core

__all__ = ["watch_mode"]

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def dense_tree(root: Path, files: int = 40, seed: int = 7) -> list[Path]:
    """Files where every word is on many lines: the index cannot prune, every file is a candidate."""
    rng = random.Random(seed)
    out = []
    for i in range(files):
        lines = (" ".join(rng.choices(WORDS, k=5)) for _ in range(12))
        out.append(write(root, f"d{i % 4}/f{i}.txt", "\n".join(lines) + "\n"))
    return out


def texts(root: Path) -> int:
    return int(_core.search_index_stats(confinement(root))["texts"])


def test_texts_are_kept_after_a_query_and_answers_stay_those_of_a_scan(tmp_path: Path, watch_mode: str) -> None:
    root = tmp_path / "ws"
    files = dense_tree(root)
    router = router_for(root)
    warm(root)
    first = grep_both(router, pattern="alpha", output_mode="count")
    assert first[0] == first[1]
    kept = texts(root)
    assert 0 < kept <= sum(f.stat().st_size for f in files)
    for word in WORDS:
        indexed, plain = grep_both(router, pattern=word)
        assert indexed == plain, word
    assert texts(root) == kept  # read from memory now, nothing new to keep


def _rewrite_same_size_elsewhere(path: Path, old: str, new: str) -> None:
    script = (
        "import sys; p, a, b = sys.argv[1:]; t = open(p).read(); "
        "f = open(p, 'r+'); f.write(t.replace(a, b, 1)); f.close()"
    )
    subprocess.run([sys.executable, "-c", script, str(path), old, new], check=True, timeout=60)


def test_a_file_rewritten_in_place_at_the_same_size_is_searched_as_it_is_now(tmp_path: Path, watch_mode: str) -> None:
    root = tmp_path / "ws"
    files = dense_tree(root)
    router = router_for(root)
    warm(root)
    grep_both(router, pattern="alpha")  # every text kept
    assert texts(root) > 0
    for n in range(12):
        target = files[(n * 7) % len(files)]
        new = f"zu{n:03d}"  # five letters, as every word it replaces
        old = next(w for w in WORDS if len(w) == 5 and w in target.read_text())
        if n % 2:
            _rewrite_same_size_elsewhere(target, old, new)
        else:
            # This process, not through toolroute's tools, and without truncating: the size,
            # the inode and the folder stay as they were; only the contents and times change.
            text = target.read_text()
            with open(target, "r+") as out:
                out.write(text.replace(old, new, 1))
        indexed, plain = grep_both(router, pattern=new)
        assert indexed == plain, (n, indexed, plain)
        assert target.name in indexed[0], (n, indexed)
        counted = grep_both(router, pattern=old, output_mode="count")
        assert counted[0] == counted[1], n


WRITER = r"""
import os, random, sys, time
root, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
words = "alpha bravo charlie delta echo foxtrot golf hotel zulu".split()
rng = random.Random(seed)
names = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
deadline, n = time.monotonic() + seconds, 0
while time.monotonic() < deadline and n < 20_000:
    path = rng.choice(names)
    text = "\n".join(" ".join(rng.choices(words, k=rng.randint(1, 8))) for _ in range(rng.randint(1, 20))) + "\n"
    how = n % 3
    if how == 0:  # in place, truncated first
        with open(path, "w") as f:
            f.write(text)
    elif how == 1:  # in place at the same size, no truncation
        size = os.path.getsize(path)
        with open(path, "r+") as f:
            f.write((text * (size // len(text) + 1))[:size])
    else:  # a new file renamed over the name, as editors save
        tmp = path + ".swap"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    n += 1
print(n)
"""


def test_a_writer_racing_the_queries_leaves_no_stale_text(tmp_path: Path, watch_mode: str) -> None:
    root = tmp_path / "ws"
    dense_tree(root, files=60)
    router = router_for(root)
    warm(root)
    grep_both(router, pattern="alpha")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root), "2.5", "11"], stdout=subprocess.PIPE, text=True)
    counts = [0, 0]

    def query(me: int) -> None:
        # Two at once: one's check can fold a change in while the other still reads.
        deadline = time.monotonic() + 10
        while writer.poll() is None and time.monotonic() < deadline and counts[me] < 400:
            call(router, "grep", pattern=WORDS[(counts[me] + me) % len(WORDS)], output_mode="count")
            counts[me] += 1

    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(query, range(2)))
    finally:
        out, _ = writer.communicate(timeout=60)
    assert int(out) > 100 and min(counts) > 5, (out, counts)
    # The writer has stopped: every answer must be the tree as it is now.
    for pattern in [*WORDS, "zulu", r"alpha \w+ bravo"]:
        for mode in ("content", "count", "files_with_matches"):
            indexed, plain = grep_both(router, pattern=pattern, output_mode=mode)
            assert indexed == plain, (pattern, mode)


BUDGET = r"""
import json, sys
from pathlib import Path
from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext
c = BuiltInToolContext(Path(sys.argv[1])).confinement
assert _core.search_index_warm(c, timeout=60)
for word in ("alpha", "bravo", "alpha"):
    _core.grep(c, GrepRequest(pattern=word, output_mode="count"), max_line_bytes=8192)
print(json.dumps(_core.search_index_stats(c)))
"""


def _stats_with_budget(root: Path, budget: str) -> dict[str, object]:
    env = {**os.environ, "TOOLROUTE_SEARCH_INDEX_TEXTS": budget, "TOOLROUTE_SEARCH_INDEX_CACHE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", BUDGET, str(root)], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    stats: dict[str, object] = json.loads(done.stdout)
    return stats


def test_the_texts_budget_bounds_what_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    files = dense_tree(root)
    size = files[0].stat().st_size
    assert _stats_with_budget(root, "0")["texts"] == 0
    small = _stats_with_budget(root, str(size * 3))
    assert 0 < int(str(small["texts"])) <= size * 3
    whole = _stats_with_budget(root, str(1 << 30))
    assert whole["texts"] == sum(f.stat().st_size for f in files)
