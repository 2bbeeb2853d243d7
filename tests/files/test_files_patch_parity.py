"""Seeded differential test: toolroute's apply_patch against the reference Codex binary.

300 model-style cases (tests/_patch_gen.py) are applied by both, each to its own copy of the same
tree; success or failure must agree, and on success the trees must be equal byte for byte. The
deliberate differences (docs/files.md, apply_patch) are left out by the named predicates in
EXCLUSIONS and counted, nothing else is. Skipped, with the reason, when the reference is not installed
(`pip install 'toolroute[parity]'`).
"""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _codex_reference import Tree, read_tree, reference_binary, run_reference, write_tree
from _files_helpers import router_for
from _patch_gen import Case, generate

from toolroute.errors import ToolError

SEED = 14_000
COUNT = 300


def pure_addition_under_anchor(patch: str) -> bool:
    """A hunk `@@ text` with only `+` lines: toolroute inserts it after the anchor, Codex at the end."""
    lines = patch.splitlines()
    for i, line in enumerate(lines):
        if not (line.startswith("@@ ") and line.strip() != "@@"):
            continue
        rest = []
        for following in lines[i + 1 :]:
            if following.startswith(("@@", "***")):
                break
            rest.append(following)
        if rest and all(r.startswith("+") for r in rest):
            return True
    return False


def blank_end_of_file_hunk(patch: str) -> bool:
    """A `*** End of File` hunk whose old side is only empty lines: when they are not at the end,
    toolroute puts the added lines at the end, Codex where the previous hunk ended (the top of the
    file for the first hunk)."""
    old_side: list[str] = []
    for line in patch.splitlines():
        if line.strip() == "*** End of File":
            if old_side and not any(old_side):
                return True
            old_side = []
        elif line.startswith(("@@", "***")):
            old_side = []
        elif line == "" or line[0] in " -":
            old_side.append(line[1:])
    return False


EXCLUSIONS = (pure_addition_under_anchor, blank_end_of_file_hunk)


def _apply_toolroute(work: Path, patch: str) -> bool:
    try:
        router_for(work).invoke("apply_patch", {"patch": patch})
    except ToolError:
        return False
    return True


def _show(tree: Tree) -> str:
    return "\n".join(f"  {path}: {data!r}" for path, data in tree.items())


def _prepare(tmp_path: Path, n: int) -> tuple[Case, Path, Path]:
    case = generate(SEED + n)
    ours, theirs = tmp_path / f"{n}-toolroute", tmp_path / f"{n}-codex"
    for root in (ours, theirs):
        root.mkdir()
        write_tree(root, dict(case.files))
    return case, ours, theirs


def test_patches_apply_like_the_reference(tmp_path: Path) -> None:
    binary = reference_binary()
    if isinstance(binary, str):
        pytest.skip(binary)
    tally: Counter[str] = Counter()
    cases = [_prepare(tmp_path, n) for n in range(COUNT)]
    compared = []
    for n, (case, ours, theirs) in enumerate(cases):
        excluded = [rule.__name__ for rule in EXCLUSIONS if rule(case.patch)]
        tally.update(f"excluded: {name}" for name in excluded)
        if not excluded:
            compared.append((SEED + n, case, ours, theirs))
    # The reference runs as a separate process per case: a few at a time, while toolroute waits.
    with ThreadPoolExecutor(max_workers=4) as pool:
        references = list(
            pool.map(lambda c: run_reference(binary, c[1].patch, c[3], tmp_path / "codex-home"), compared)
        )
    differences: list[str] = []
    for (seed, case, ours, theirs), reference in zip(compared, references, strict=True):
        applied = _apply_toolroute(ours, case.patch)
        tally["applied" if applied else "refused"] += 1
        if applied != (reference.code == 0):
            differences.append(
                f"seed {seed}: toolroute {'applied' if applied else 'refused'}, Codex "
                f"{'applied' if reference.code == 0 else 'refused'} ({reference.stderr.strip()})\n{case.patch}"
            )
        elif applied and read_tree(ours) != read_tree(theirs):
            differences.append(
                f"seed {seed}: trees differ\n{case.patch}\ntoolroute:\n{_show(read_tree(ours))}\n"
                f"Codex:\n{_show(read_tree(theirs))}"
            )
        elif not applied:
            # Both refused. toolroute is transactional; Codex keeps what it wrote before the failure.
            assert read_tree(ours) == case.files, f"seed {seed}: a refused patch changed the tree"
    assert not differences, f"{len(differences)} differences, first:\n" + "\n\n".join(differences[:3])
    # The generator must exercise both outcomes, with most patches applying.
    assert tally["applied"] > COUNT // 2 and tally["refused"] > 0, tally


@pytest.mark.parametrize(
    ("patch", "excluded"),
    [
        ("*** Begin Patch\n*** Update File: a\n@@ def f():\n+x\n*** End Patch", True),
        ("*** Begin Patch\n*** Update File: a\n@@ def f():\n+x\n@@\n y\n+z\n*** End Patch", True),
        ("*** Begin Patch\n*** Update File: a\n@@\n+x\n*** End Patch", False),
        ("*** Begin Patch\n*** Update File: a\n@@ def f():\n y\n+x\n*** End Patch", False),
    ],
)
def test_exclusion_predicate(patch: str, excluded: bool) -> None:
    assert pure_addition_under_anchor(patch) is excluded


@pytest.mark.parametrize(
    ("body", "excluded"),
    [
        ("@@\n\n+x\n*** End of File", True),
        ("@@\n-\n \n+x\n*** End of File", True),
        ("@@\n y\n\n+x\n*** End of File", False),
        ("@@\n+x\n*** End of File", False),
        ("@@\n\n+x\n@@\n y\n+z\n*** End of File", False),
    ],
)
def test_blank_end_of_file_predicate(body: str, excluded: bool) -> None:
    assert blank_end_of_file_hunk(f"*** Begin Patch\n*** Update File: a\n{body}\n*** End Patch") is excluded


def test_generator_is_seeded_and_model_like() -> None:
    cases = [generate(SEED + n) for n in range(COUNT)]
    assert [c.patch for c in cases[:20]] == [generate(SEED + n).patch for n in range(20)]
    patches = "\n".join(c.patch for c in cases)
    assert re.search(r"\n\n\+", patches), "a bare empty line before appended lines"
    assert "*** End of File" in patches and "*** Move to:" in patches and "*** Delete File:" in patches
    assert any(b"\r\n" in data for c in cases for data in c.files.values())
