"""Process groups: signal a whole group, and tell whether any live process is left in it.

Every command leads its own process group, so the group id is the shell's pid and every child it
forks shares that group (unless it calls setsid or setpgid itself).
"""

from __future__ import annotations

import os


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its credentials (setuid program): still there
        return True
    return True


def group_exists(pgid: int) -> bool:
    """Any process, zombies included, still in the group."""
    return signal_group(pgid, 0)


def _stat_fields(pid: str) -> tuple[str, int] | None:
    """(state, pgrp) of a process from /proc/<pid>/stat, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: fields start after the last ')'.
    rest = raw[raw.rfind(b")") + 2 :].split()
    if len(rest) < 3:
        return None
    return rest[0].decode(), int(rest[2])


def live_members(pgid: int) -> list[int]:
    """Pids of the group's processes that are not zombies (a zombie is dead, only unreaped)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and fields[1] == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


def group_finished(pgid: int) -> bool:
    """True once no live process is left in the group (after its leader has been reaped).

    The fast path is one kill(0). Orphaned members are reparented to init, which reaps them in its
    own time (seconds, on some container inits), so leftover zombies are looked past via /proc.
    """
    return not group_exists(pgid) or not live_members(pgid)
