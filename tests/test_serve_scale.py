"""What a served user costs stays bounded: the per-user doors and workspace contexts are a cache
of the most recently used users (each context holds its workspace root open), and served mode
lifts the soft limit on open descriptors to the hard one, as a server with hundreds of users
needs (the usual soft limit of 1,024 is reached near 300 connected users)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from toolroute import ToolRouter
from toolroute.serve import tenants
from toolroute.serve.tenants import Tenancy


def test_the_least_recently_used_users_are_dropped_from_the_cache(
    deployed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tenants, "MAX_CACHED_USERS", 2)
    router = ToolRouter()
    tenancy = Tenancy(router, ["read_file"], [], workspace_template=str(deployed / "ws" / "{user}"))
    first = tenancy.context("alice")
    tenancy.context("bob")
    assert tenancy.context("alice") is first  # used again: now the most recent
    tenancy.context("carol")  # bob, the least recent, goes
    assert set(tenancy._contexts) == {"alice", "carol"}
    doors = [tenancy.door(user) for user in ("alice", "bob", "carol")]
    assert len(tenancy._doors) == 2 and set(tenancy._doors) == {"bob", "carol"}
    again = tenancy.context("bob")  # made anew, on the same workspace
    assert again.workspace_root == deployed / "ws" / "bob" and again.user_id == "bob"
    assert doors[1] is tenancy.door("bob")
    router.close()


CHILD = """
import resource
from toolroute.serve.served_mode import raise_descriptor_limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
assert soft == 256, soft
print(raise_descriptor_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)
"""


def test_served_mode_lifts_the_descriptor_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit here is too low to see a change")

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, preexec_fn=lower, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
    returned, now, child_hard = (int(x) for x in child.stdout.split())
    assert returned == now > 256
    assert now == child_hard or child_hard == resource.RLIM_INFINITY
