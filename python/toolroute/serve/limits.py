"""Per-user limits of served mode: concurrent calls, calls per minute and argument size.

Each user has their own counters, so a flood from one user fills only that user's allowance and
never delays another's calls. A call over a limit is refused at once with a message saying which
limit and by how much, never queued behind the flood.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from toolroute.errors import ToolArgumentError, ToolError
from toolroute.serve.compact import compacted


class LimitExceeded(ToolError):
    """A per-user limit refused this call."""


@dataclass(frozen=True)
class UserLimits:
    max_concurrent_calls: int = 8
    calls_per_minute: int = 600
    max_argument_bytes: int = 1 << 20  # the JSON text of one call's arguments

    def __post_init__(self) -> None:
        for name in ("max_concurrent_calls", "calls_per_minute", "max_argument_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


# The rate limit's window: calls started within the last this many seconds count.
WINDOW = 60.0


@dataclass
class _Usage:
    running: int = 0
    recent: deque[float] = field(default_factory=deque)  # start times within the last minute


class LimitBook:
    """The counters of every user, behind one lock (each check is a few dict operations)."""

    def __init__(self, limits: UserLimits | None = None, clock: Any = time.monotonic) -> None:
        self.limits = limits or UserLimits()
        self._clock = clock
        self._lock = threading.Lock()
        self._usage: dict[str, _Usage] = {}

    def check_arguments(self, arguments: Mapping[str, Any] | None) -> None:
        size = len(json.dumps(arguments or {}, ensure_ascii=False).encode())
        if size > self.limits.max_argument_bytes:
            raise ToolArgumentError(
                f"the call's arguments are {size} bytes, over this server's limit of "
                f"{self.limits.max_argument_bytes} bytes"
            )

    @contextmanager
    def call(self, user_id: str) -> Iterator[None]:
        """Hold one of `user_id`'s call slots for the duration of the block."""
        with self._lock:
            usage = self._counted(user_id, slot=True)
            usage.running += 1
        try:
            yield
        finally:
            with self._lock:
                usage.running -= 1

    def count(self, user_id: str) -> None:
        """Count one call against `user_id`'s calls per minute, holding no slot (a code program's
        inner call: the program's own call holds the slot they share)."""
        with self._lock:
            self._counted(user_id, slot=False)

    def _counted(self, user_id: str, *, slot: bool) -> _Usage:
        """The user's usage with one more call started now; refused over a limit (lock held)."""
        now = self._clock()
        usage = self._usage.setdefault(user_id, _Usage())
        while usage.recent and now - usage.recent[0] >= WINDOW:
            usage.recent.popleft()
        if slot and usage.running >= self.limits.max_concurrent_calls:
            raise LimitExceeded(
                f"user {user_id!r} already has {usage.running} calls running "
                f"(limit {self.limits.max_concurrent_calls}); retry when one finishes"
            )
        if len(usage.recent) >= self.limits.calls_per_minute:
            wait = WINDOW - (now - usage.recent[0])
            raise LimitExceeded(
                f"user {user_id!r} made {len(usage.recent)} calls in the last minute "
                f"(limit {self.limits.calls_per_minute}); retry in {wait:.0f} s"
            )
        usage.recent.append(now)
        return usage

    def prune(self) -> int:
        """Forget the users with no call running and none started within the last minute (their
        counters say nothing any more), so a server keeps counters only for its recent users,
        not for every user it has met. Returns how many were forgotten."""
        now = self._clock()
        with self._lock:
            quiet = [
                user
                for user, usage in self._usage.items()
                if usage.running == 0 and (not usage.recent or now - usage.recent[-1] >= WINDOW)
            ]
            for user in quiet:
                del self._usage[user]
            if quiet:  # a table sized for the crowd would stay (serve/compact.py)
                self._usage = compacted(self._usage)
        return len(quiet)

    def running(self) -> int:
        """Calls running now, over every user."""
        with self._lock:
            return sum(usage.running for usage in self._usage.values())

    def tracked(self) -> int:
        """Users whose counters are kept."""
        with self._lock:
            return len(self._usage)


# Processes (and threads) each tenant's uid may have at once: its commands, their children and
# its own upstream servers together.
MAX_TENANT_PROCESSES = 512


def cap_tenant_processes(cap: int) -> int:
    """Give every tenant's uid at most `cap` processes, through this process's own
    RLIMIT_NPROC, which every child inherits. The kernel counts it per real uid (and per user
    namespace level, so bubblewrap's sandboxes count too), and never applies it to root: the
    server itself, running as root, is not bound; each tenant's commands, running as that
    tenant's own uid, are, all of them together. (Without per-tenant uids the count would be
    the server's own uid's, shared by every tenant and the server's threads: not set then.)
    Returns the limit set (lowered to the hard limit where that is lower)."""
    import resource

    if cap < 1:
        raise ValueError("the process limit must be at least 1")
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    soft = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    return soft
