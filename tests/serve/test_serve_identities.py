"""Which uid each tenant's commands run as: one per tenant, recorded as its workspace's owner,
stable across restarts and unique across replicas starting at once on one machine."""

from __future__ import annotations

import os
import shutil
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


# ---- the deployment's secret (issue 55) ------------------------------------------------------

WIDE = range(0x70000000, 0x70000000 + 65536)  # the default's size: starting points rarely meet


@needs_root
def test_two_deployments_on_one_host_give_a_user_different_uids(deployed: Path) -> None:
    """Two deployments (two registries, two workspace folders) on one host: their tenants of the
    same ids get different uids, so one deployment's tenant never shares the other's
    `--max-processes` budget (the uid was a function of the user id alone before)."""
    from toolroute.serve.store import UserStore

    got = []
    for name in ("one", "two"):
        with UserStore(f"sqlite:///{deployed / f'{name}.db'}") as store:
            workspaces = Workspaces(str(deployed / name / "{user}"), WIDE, store.deployment_secret())
            got.append([workspaces.ensure(f"user{i}")[1] for i in range(8)])
    assert sum(a != b for a, b in zip(*got, strict=True)) >= 7, got  # (chance: 8 in 65,536 may meet)


@needs_root
def test_replicas_on_one_registry_agree_and_old_workspaces_keep_their_owner(deployed: Path) -> None:
    from toolroute.serve.store import UserStore

    registry = f"sqlite:///{deployed / 'users.db'}"
    with UserStore(registry) as first, UserStore(registry) as second:
        secret = first.deployment_secret()
        assert second.deployment_secret() == secret and len(secret) == 32
    # Replicas on two hosts (two workspace folders) start every user at the same uid.
    here = Workspaces(str(deployed / "a" / "{user}"), WIDE, secret)
    there = Workspaces(str(deployed / "b" / "{user}"), WIDE, secret)
    assert [here.ensure(f"u{i}")[1] for i in range(8)] == [there.ensure(f"u{i}")[1] for i in range(8)]
    # A workspace made before (its owner derived otherwise) keeps it: the owner is the record.
    old = deployed / "a" / "veteran"
    old.mkdir(mode=0o700)
    os.chown(old, WIDE.start + 7, WIDE.start + 7)
    assert here.ensure("veteran") == (old, WIDE.start + 7)


@needs_root
def test_without_a_registry_the_secret_lives_beside_the_workspaces(deployed: Path) -> None:
    template = str(deployed / "ws" / "{user}")
    first = Workspaces(template, WIDE).ensure("alice")[1]
    secret_file = deployed / "ws" / ".toolroute-uid-secret"
    assert secret_file.stat().st_mode & 0o777 == 0o600
    shutil.rmtree(deployed / "ws" / "alice")
    assert Workspaces(template, WIDE).ensure("alice")[1] == first  # the same file: the same start
