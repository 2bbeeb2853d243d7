"""Codex's public apply_patch scenario corpus, byte for byte.

Every scenario must give exactly Codex's expected tree, with one deliberate exception: in 015
Codex keeps the file it created before a later hunk failed; toolroute's patches are
transactional, so there the tree must stay exactly as it was (empty).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _files_helpers import router_for, snapshot

from toolroute.errors import ToolError

# Vendored with its license and source note (fixtures/codex-apply-patch/SOURCE.md).
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "codex-apply-patch"
STRICTER = {"015_failure_after_partial_success_leaves_changes"}


def _scenarios() -> list[Path]:
    if not CORPUS.is_dir():  # fail loudly: a missing corpus must never pass as "no scenarios"
        raise RuntimeError(f"the Codex apply_patch conformance corpus is missing: {CORPUS}")
    found = sorted(p for p in CORPUS.iterdir() if (p / "patch.txt").is_file())
    if len(found) < 23:
        raise RuntimeError(f"expected 23 scenarios in {CORPUS}, found {len(found)}")
    return found


SCENARIOS = _scenarios()


def _run(scenario: Path, work: Path) -> ToolError | None:
    if (scenario / "input").is_dir():
        shutil.copytree(scenario / "input", work, dirs_exist_ok=True, copy_function=shutil.copyfile)
    try:
        router_for(work).invoke("apply_patch", {"patch": (scenario / "patch.txt").read_text()})
    except ToolError as exc:
        return exc
    return None


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.name not in STRICTER], ids=lambda s: s.name)
def test_scenario_matches_codex(scenario: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    error = _run(scenario, work)
    expected = snapshot(scenario / "expected") if (scenario / "expected").is_dir() else {}
    assert snapshot(work) == expected, f"{scenario.name}: error={error}"
    if "rejects" in scenario.name or "fails" in scenario.name or "requires" in scenario.name:
        assert error is not None, f"{scenario.name} must be refused"


def test_015_is_all_or_nothing(tmp_path: Path) -> None:
    # Codex leaves created.txt behind (its writes are not transactional, codex#34917). toolroute
    # stages every file first, so the failed Update of missing.txt means nothing is written.
    scenario = CORPUS / "015_failure_after_partial_success_leaves_changes"
    work = tmp_path / "work"
    work.mkdir()
    error = _run(scenario, work)
    assert error is not None and "missing.txt" in str(error)
    assert snapshot(work) == {}
    assert snapshot(scenario / "expected") == {"created.txt": b"hello\n"}  # what Codex does instead
