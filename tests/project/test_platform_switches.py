"""The `portable` build runs only the stages whose code differs there (CI's portable check,
`pytest -m portable`). This holds that list to the sources: every file with a switch the portable
build flips is known here with the stages that test it, and those stages are marked portable.
A switch in a new file fails until it is placed, so the portable check cannot silently miss it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _ci import NOT_PORTABLE, PORTABLE_STAGES, fail_skips_ci_must_not_have, is_portable, required_component

ROOT = Path(__file__).resolve().parents[2]

# What the portable build flips: Rust's `cfg(native_linux)` (rust/files/build.rs) and
# `feature = "portable"`, the crates' `NATIVE_LINUX`, and Python's `PORTABLE` / `LINUX_NATIVE`.
RUST_SWITCH = re.compile(r"\bnative_linux\b|feature\s*=\s*\"portable\"|\bNATIVE_LINUX\b")
PYTHON_SWITCH = re.compile(r"\bPORTABLE\b|\bLINUX_NATIVE\b")

# Each file holding a switch, with the stages (tests/<stage>/) whose tests run its both paths.
SWITCHED: dict[str, frozenset[str]] = {
    "rust/files/build.rs": frozenset({"files", "search"}),
    "rust/files/src/lib.rs": frozenset({"files", "search"}),
    "rust/files/src/os.rs": frozenset({"files", "search"}),
    "rust/files/src/txn.rs": frozenset({"files"}),
    "rust/files/src/recover.rs": frozenset({"files"}),
    "rust/search/src/index/mod.rs": frozenset({"search"}),
    "rust/search/src/index/daemon/mod.rs": frozenset({"search"}),
    "rust/search/src/index/mark.rs": frozenset({"search"}),
    "rust/search/src/rules.rs": frozenset({"search"}),
    # `_core.PORTABLE`, read only by `_platform.py`, whose `LINUX_NATIVE` only pump.py reads
    # (a new reader is a new file with a switch, and fails below until placed).
    "rust/binding/src/lib.rs": frozenset({"bash"}),
    "python/toolroute/_platform.py": frozenset({"bash"}),
    "python/toolroute/builtins/_process/pump.py": frozenset({"bash"}),
}


def switched_files() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "rust").rglob("*.rs"):
        if "target" not in path.relative_to(ROOT).parts and RUST_SWITCH.search(path.read_text()):
            found.add(path.relative_to(ROOT).as_posix())
    for path in (ROOT / "python" / "toolroute").rglob("*.py"):
        if PYTHON_SWITCH.search(path.read_text()):
            found.add(path.relative_to(ROOT).as_posix())
    return found


def test_every_platform_switch_is_in_a_known_file() -> None:
    unknown = sorted(switched_files() - SWITCHED.keys())
    assert not unknown, (
        f"a platform switch the portable build flips is in {unknown}: add each to SWITCHED here with the "
        "stages that test it, and those stages to PORTABLE_STAGES (tests/conftest.py)"
    )


def test_every_known_file_still_holds_a_switch() -> None:
    # A file that lost its switch no longer needs its stages run twice.
    assert sorted(SWITCHED.keys() - switched_files()) == []


def test_the_stages_of_every_switch_are_marked_portable() -> None:
    needed = frozenset().union(*SWITCHED.values())
    assert needed <= PORTABLE_STAGES, f"not marked portable: {sorted(needed - PORTABLE_STAGES)}"
    assert all((ROOT / "tests" / stage).is_dir() for stage in needed)


def test_the_items_of_a_portable_stage_carry_the_mark(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    marked = {item.nodeid.split("/")[1] for item in items if item.get_closest_marker("portable")}
    unmarked = {item.nodeid.split("/")[1] for item in items if not item.get_closest_marker("portable")}
    assert not (marked - PORTABLE_STAGES)
    assert "project" in unmarked  # this very test is in a stage the portable build does not change
    for item in items:  # the module a nodeid names decides, the same way for every item
        module = item.nodeid.split("::")[0].removeprefix("tests/")
        assert bool(item.get_closest_marker("portable")) == is_portable(module), item.nodeid


def test_the_modules_left_out_of_the_portable_run_are_placed() -> None:
    # Each exists in a portable stage (else leaving it out would mean nothing, or miss a renamed one).
    for module in sorted(NOT_PORTABLE):
        assert module.split("/")[0] in PORTABLE_STAGES and (ROOT / "tests" / module).is_file(), module
    assert not is_portable("bash/test_bash_sandbox.py") and is_portable("bash/test_bash_exec.py")
    assert not is_portable("core/test_core_routing.py") and not is_portable("project/test_platform_switches.py")


# ---- CI's rule on skips (tests/_ci.py) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "component"),
    [
        ("bubblewrap is not installed", "bubblewrap"),
        ("PostgreSQL server binaries (Debian package postgresql) are not installed", "postgresql"),
        ("HAProxy (Debian package haproxy) is not installed", "haproxy"),
        ("no sandbox here: bubblewrap cannot create a sandbox", "bubblewrap"),
        ("no Landlock here: this kernel does not offer Landlock", "landlock"),
        ("the index daemon is Linux's (inotify, SCM_RIGHTS)", None),
        ("this deployment runs no index daemon", None),
    ],
)
def test_which_skip_reasons_name_a_component_ci_must_have(reason: str, component: str | None) -> None:
    assert required_component(reason) == component


def _skipped_report(reason: str) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid="t.py::t", location=("t.py", 1, "t"), keywords={}, outcome="skipped",
        longrepr=("t.py", 1, f"Skipped: {reason}"), when="setup",
    )  # fmt: skip


def test_under_ci_a_skip_for_a_missing_component_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    missing, other = _skipped_report("HAProxy is not installed"), _skipped_report("run once")
    fail_skips_ci_must_not_have(missing)
    fail_skips_ci_must_not_have(other)
    assert (missing.outcome, other.outcome) == ("failed", "skipped")
    assert "HAProxy is not installed" in str(missing.longrepr)
    monkeypatch.delenv("CI")
    elsewhere = _skipped_report("HAProxy is not installed")
    fail_skips_ci_must_not_have(elsewhere)
    assert elsewhere.outcome == "skipped"
