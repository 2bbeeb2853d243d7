"""Codex apply-patch's own unit tests (Apache-2.0), ported as data and run through toolroute.

The cases are in tests/fixtures/codex-apply-patch-unit/cases.json (source, commit and license in
the NOTICE there): the tree before, the patch, and either the tree after (with Codex's success text)
or Codex's error text with the tree it leaves. toolroute must give the same tree. A parse error
must carry Codex's message word for word; other refusals carry toolroute's own, longer message
(file, hunk number, patch line, the lines that did not match), so only the refusal is compared.
The success text is Codex's, except that a move also names its source (`moved_suffix`).

With the reference binary installed (the `parity` extra), every case is also run through it, which
proves the ported expectations are the reference's own; REFERENCE_QUIRKS lists the cases where the
0.163.0 Linux binary departs from the upstream unit test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _codex_reference import Tree, read_tree, reference_binary, run_reference, write_tree
from _files_helpers import router_for

from toolroute.errors import ToolArgumentError, ToolError

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "codex-apply-patch-unit" / "cases.json").read_text(encoding="utf-8")
)["cases"]

# Deliberate differences: toolroute's tree for these cases, and why.
DIFFERENCES: dict[str, tuple[str, Tree]] = {
    "cli_failure_after_partial_success": (
        "toolroute's patches are transactional: the failed Update of missing.txt means the earlier "
        "Add is not written either (Codex keeps created.txt)",
        {},
    ),
}

# Where the reference binary itself does not do what the upstream unit test asserts; toolroute
# follows the unit test.
REFERENCE_QUIRKS: dict[str, str] = {
    "crlf_embedded_cr_kept_on_append": "a Windows-only upstream test: the Linux binary ends BAZ with a lone CR",
    "chunk_nested_anchors": "0.163.0 has no nested @@ anchors: it refuses the second @@ line",
    "cli_self_move_preserves_file": "0.163.0 deletes a file moved onto itself (codex#6358 regressed)",
}


def _tree(data: dict[str, str | None]) -> Tree:
    return {path: None if text is None else text.encode() for path, text in data.items()}


def _moved_suffix(summary: str) -> str:
    """Codex lists a move as `M dest`; toolroute adds ` (moved from src)`."""
    return re.sub(r" \(moved from [^)]*\)$", "", summary, flags=re.MULTILINE)


def _case_ids() -> list[str]:
    return [c["name"] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=_case_ids())
def test_codex_unit_case(case: dict[str, Any], tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_tree(work, _tree(case["files"]))
    expected = _tree(case["expected"])
    if case["name"] in DIFFERENCES:
        expected = DIFFERENCES[case["name"]][1]
    router = router_for(work)
    if "error" in case:
        with pytest.raises(ToolError) as refused:
            router.execute("apply_patch", {"patch": case["patch"]})
        codex_message = case["error"].rstrip("\n")
        if codex_message.startswith(("Invalid patch", "No files were modified")):
            assert isinstance(refused.value, ToolArgumentError)
            assert codex_message in str(refused.value)
        assert read_tree(work) == expected
        return
    out = router.execute("apply_patch", {"patch": case["patch"]})
    assert read_tree(work) == expected
    if "stdout" in case:
        assert _moved_suffix(out.text) + "\n" == case["stdout"]


def test_empty_patch_error_is_exactly_codexs(tmp_path: Path) -> None:
    with pytest.raises(ToolArgumentError) as refused:
        router_for(tmp_path).invoke("apply_patch", {"patch": "*** Begin Patch\n*** End Patch"})
    assert str(refused.value) == "No files were modified."


def test_every_listed_case_exists() -> None:
    names = set(_case_ids())
    assert len(names) == len(CASES) >= 50
    assert set(DIFFERENCES) <= names and set(REFERENCE_QUIRKS) <= names


@pytest.mark.parametrize("case", CASES, ids=_case_ids())
def test_reference_agrees_with_ported_case(case: dict[str, Any], tmp_path: Path) -> None:
    binary = reference_binary()
    if isinstance(binary, str):
        pytest.skip(binary)
    if case["name"] in REFERENCE_QUIRKS:
        pytest.skip(f"reference quirk: {REFERENCE_QUIRKS[case['name']]}")
    work = tmp_path / "work"
    work.mkdir()
    write_tree(work, _tree(case["files"]))
    ran = run_reference(binary, case["patch"], work, tmp_path / "codex-home")
    assert read_tree(work) == _tree(case["expected"])
    if "error" in case:
        assert ran.code != 0 and ran.stderr == case["error"]
    else:
        assert ran.code == 0, ran.stderr
        assert ran.stdout == case.get("stdout", ran.stdout)
