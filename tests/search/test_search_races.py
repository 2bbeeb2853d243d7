"""Confinement under a hostile second process (issue 12): a folder swapped for a symlink to
outside, or a file for a FIFO, between any check and use. Bounded: at most 2,000 calls or a few
seconds per case, each case in its own process with a timeout so that a hang fails instead of
blocking the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parents[1]
TRIES, SECONDS = 2000, 6.0

DIR_CASES = ["grep_path", "grep_walk", "grep_follow", "grep_follow_path", "glob_walk", "glob_path", "glob_follow"]
FIFO_CASES = ["fifo_grep_path", "fifo_grep_walk", "fifo_glob"]


def race(tmp_path: Path, case: str) -> dict[str, int]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "_search_race.py"), str(tmp_path), case, str(TRIES), str(SECONDS)],
        capture_output=True,
        text=True,
        timeout=SECONDS + 60,  # a call stuck on a FIFO fails here
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", DIR_CASES)
def test_swapped_folder_never_leads_outside(tmp_path: Path, case: str) -> None:
    result = race(tmp_path, case)
    assert result["leaked"] == 0, result
    # The race really ran: calls saw the inside content, and the swapper kept swapping.
    assert result["calls"] >= 20 and result["inside"] > 0 and result["swaps"] > 100, result


@pytest.mark.parametrize("case", FIFO_CASES)
def test_fifo_swapped_in_never_hangs(tmp_path: Path, case: str) -> None:
    result = race(tmp_path, case)
    assert result["calls"] >= 20 and result["swaps"] > 100, result
