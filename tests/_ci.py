"""What CI asks of the suite.

Under CI (`CI=true`, set by .ci/run) a test may not be skipped for want of a component CI is
meant to have: the sandbox (bubblewrap, Landlock), PostgreSQL, HAProxy, strace. Such a skip becomes
a failure, so a machine missing one cannot pass green with those tests silently unrun. Elsewhere
(a laptop without PostgreSQL) the skip stays a skip, with its reason."""

from __future__ import annotations

import os

import pytest

# The stages whose code differs in the `portable` build (the POSIX path a non-Linux host takes):
# marked `portable` (tests/conftest.py), and CI runs them once more against that build. Which
# sources hold a platform switch, and so which stages these must be, is held by
# tests/project/test_platform_switches.py.
PORTABLE_STAGES = frozenset({"files", "search", "bash"})

# Modules of those stages that test only what a non-Linux host never runs: bubblewrap, Landlock
# and pasta confinement (README: a sandbox asked for off Linux is refused). In the portable build
# on Linux they would test a pairing no host has; the process paths they pass through are the
# other bash modules' subject.
NOT_PORTABLE = frozenset({"bash/test_bash_sandbox.py", "bash/test_bash_network.py", "bash/test_bash_view.py"})


def is_portable(relative: str) -> bool:
    """Whether the test module at `relative` (a path under tests/, with /) is run against the
    portable build."""
    return relative.split("/")[0] in PORTABLE_STAGES and relative not in NOT_PORTABLE


# Words of the skip reasons that name such a component (the skip sites say what is missing).
REQUIRED_IN_CI = (
    "bubblewrap",
    "landlock",
    "sandbox",
    "postgresql",
    "postgres",
    "haproxy",
    "runuser",
    "pasta",
    "strace",
)


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def required_component(reason: str) -> str | None:
    """The component CI must have that a skip's reason names, if any."""
    lowered = reason.lower()
    return next((name for name in REQUIRED_IN_CI if name in lowered), None)


def fail_skips_ci_must_not_have(report: pytest.TestReport) -> None:
    """Turn `report`'s skip into a failure when CI must have what it was skipped for."""
    if not report.skipped or not under_ci():
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    component = required_component(reason)
    if component is not None:
        report.outcome = "failed"
        report.longrepr = f"skipped for want of {component}, which CI must have (CI=true): {reason}"
