"""Which uid each tenant's commands run as in served mode, and the workspace that records it.

A server running as root gives every tenant a uid of its own from a range (default
`DEFAULT_UIDS`, above the ranges systemd hands to containers), so even a mount mistake in a
sandbox cannot reach another tenant's files: each workspace is a 0700 folder owned by its
tenant's uid, and the file tools give what they make there to that owner. The allocation is
kept where it cannot drift: the owner of the tenant's workspace *is* its uid. A new tenant gets
the first free uid from a starting point derived from its id and the deployment's secret (kept
in the registry, `UserStore.deployment_secret`; without a registry, in a 0600 file beside the
workspaces), chosen under a lock file beside the workspaces, so replicas on one machine never
hand out one uid twice, replicas of one deployment start from the same point, and two
deployments on one host give one user id different uids (the kernel counts `--max-processes`
per uid: the same uid would be one budget for both). A workspace made before keeps its owner.

A server that is not root cannot switch uids: its tenants' commands share its uid, and only the
minimal view (docs/deploy.md) keeps them apart.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from toolroute.errors import ToolArgumentError
from toolroute.naming import UserId

USER_PLACEHOLDER = "{user}"
# 65,536 uids from 0x70000000: above systemd's container range (524288-1879048191) and its
# dynamic users, far below the 32-bit end that some tools reserve.
DEFAULT_UIDS = range(0x70000000, 0x70000000 + 65536)
LOCK_NAME = ".toolroute-workspaces.lock"
SECRET_NAME = ".toolroute-uid-secret"  # beside the workspaces, where no registry keeps one


def parse_uid_range(text: str) -> range:
    """`FIRST-LAST` (inclusive) as a range; raises ToolArgumentError for anything else."""
    first, sep, last = text.partition("-")
    try:
        lo, hi = int(first), int(last)
    except ValueError:
        lo = hi = -1
    if not sep or not 0 < lo <= hi < 2**32 - 1:
        raise ToolArgumentError(f"a uid range is FIRST-LAST with 0 < FIRST <= LAST < 4294967295, got {text!r}")
    return range(lo, hi + 1)


def template_base(template: str) -> Path:
    """The folder every workspace of `template` lies beneath: the part before `{user}`."""
    if USER_PLACEHOLDER not in template:
        raise ToolArgumentError(f"the workspace template {template!r} must contain {USER_PLACEHOLDER}")
    head = template.split(USER_PLACEHOLDER, 1)[0]
    return Path(os.path.dirname(head) if not head.endswith("/") else head).expanduser()


@dataclass(frozen=True)
class Workspaces:
    """Per-user workspace roots from a template such as `/srv/ws/{user}`; with `uids`, each
    one owned by (and so recording) its tenant's uid."""

    template: str
    uids: range | None = None
    secret: bytes | None = None  # the deployment's (None: a file beside the workspaces holds one)

    def __post_init__(self) -> None:
        template_base(self.template)  # validates the placeholder

    def path(self, user_id: str) -> Path:
        user_id = UserId.of(user_id)  # the id becomes a path component: never `..` or a separator
        return Path(self.template.replace(USER_PLACEHOLDER, user_id)).expanduser()

    def ensure(self, user_id: str) -> tuple[Path, int | None]:
        """The user's workspace (made 0700 if new) and the uid its commands run as."""
        root = self.path(user_id)
        if self.uids is None:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            return root, None
        with self._locked():
            owner = _owner(root)
            if owner is not None and owner in self.uids:
                return root, owner
            uid = self._free_uid(user_id)
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if owner is not None:
                _give_tree(root, uid)  # a workspace from before uids: all of it becomes the tenant's
            os.chown(root, uid, uid)
            os.chmod(root, 0o700)
            return root, uid

    def _free_uid(self, user_id: str) -> int:
        assert self.uids is not None
        taken = {_owner(Path(p)) for p in glob.glob(glob.escape(self.template).replace(USER_PLACEHOLDER, "*"))}
        taken.discard(None)
        digest = hmac.new(self.secret or self._local_secret(), user_id.encode(), hashlib.sha256).digest()
        start = int.from_bytes(digest[:8], "big") % len(self.uids)
        for step in range(len(self.uids)):
            uid = self.uids[(start + step) % len(self.uids)]
            if uid not in taken:
                return uid
        raise ToolArgumentError(f"no free uid left in {self.uids.start}-{self.uids.stop - 1} for user {user_id!r}")

    def _local_secret(self) -> bytes:
        """The secret kept beside the workspaces (made 0600 on first use; under the lock)."""
        path = template_base(self.template) / SECRET_NAME
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return bytes.fromhex(path.read_text().strip())
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        return bytes.fromhex(path.read_text().strip())

    @contextmanager
    def _locked(self) -> Iterator[None]:
        base = template_base(self.template)
        base.mkdir(parents=True, exist_ok=True)
        fd = os.open(base / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _give_tree(root: Path, uid: int) -> None:
    """Everything beneath `root` owned by `uid` (symlinks themselves, never their targets)."""
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), uid, uid)


def _owner(path: Path) -> int | None:
    try:
        return path.lstat().st_uid
    except FileNotFoundError:
        return None
