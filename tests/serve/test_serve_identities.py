"""Which uid each tenant's commands run as: one per tenant, recorded as its workspace's owner,
stable across restarts and unique across replicas starting at once on one machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolroute.errors import ToolArgumentError
from toolroute.serve.identities import Workspaces, parse_uid_range, template_base

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving workspaces to other uids needs root")
UIDS = range(0x70000000 + 100, 0x70000000 + 100 + 64)  # small: collisions of the starting point are likely


@pytest.mark.parametrize("text", ["", "5", "10-5", "0-10", "a-b", "1-4294967295", "-3-4"])
def test_a_bad_uid_range_is_refused(text: str) -> None:
    with pytest.raises(ToolArgumentError, match="FIRST-LAST"):
        parse_uid_range(text)


def test_the_template_base_is_the_folder_above_the_user_part() -> None:
    assert template_base("/srv/ws/{user}") == Path("/srv/ws")
    assert template_base("/srv/ws/u-{user}/work") == Path("/srv/ws")
    with pytest.raises(ToolArgumentError, match="must contain"):
        template_base("/srv/ws")


@needs_root
def test_each_tenant_gets_a_uid_of_its_own_kept_across_restarts(deployed: Path) -> None:
    template = str(deployed / "ws" / "{user}")
    first = {f"user{i}": Workspaces(template, UIDS).ensure(f"user{i}") for i in range(40)}
    uids = [uid for _, uid in first.values()]
    assert len(set(uids)) == 40 and all(uid in UIDS for uid in uids)
    for user, (root, uid) in first.items():
        assert root.stat().st_uid == uid and root.stat().st_mode & 0o777 == 0o700
        assert Workspaces(template, UIDS).ensure(user) == (root, uid)  # a new process: the same uid


@needs_root
def test_a_workspace_made_before_uids_is_given_whole_to_its_tenant(deployed: Path) -> None:
    template = str(deployed / "ws" / "{user}")
    root, none = Workspaces(template).ensure("alice")
    assert none is None
    (root / "sub").mkdir()
    (root / "sub" / "f.txt").write_text("x")
    os.symlink("/etc/hostname", root / "link")
    _, uid = Workspaces(template, UIDS).ensure("alice")
    assert uid is not None
    for path in (root, root / "sub", root / "sub" / "f.txt"):
        assert path.stat().st_uid == uid
    assert (root / "link").lstat().st_uid == uid and Path("/etc/hostname").stat().st_uid == 0


STARTER = r"""
import sys
from toolroute.serve.identities import Workspaces
template, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for user in sys.argv[4:]:
    print(user, Workspaces(template, range(first, last + 1)).ensure(user)[1])
"""


@needs_root
def test_replicas_allocating_at_once_never_share_a_uid(deployed: Path) -> None:
    template = str(deployed / "ws" / "{user}")
    users = [f"u{i}" for i in range(48)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, template, str(UIDS.start), str(UIDS.stop - 1), *users[i::4]],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    given = dict(line.split() for p in procs for line in p.communicate(timeout=120)[0].splitlines())
    assert all(p.returncode == 0 for p in procs)
    assert sorted(given) == sorted(users) and len(set(given.values())) == len(users)
