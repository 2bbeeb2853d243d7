"""Maps that give their memory back once the crowd that grew them has left.

A Python dict or set never shrinks its table when entries go: a map of 500 users keeps a table
for 500 after the last of them is released, and that block (with the arena or pages it landed
in, among the crowd's) stays for the process's life. A copy is sized for what is left; the old
table is freed whole (issue 62).
"""

from __future__ import annotations

from typing import Any, TypeVar

C = TypeVar("C", bound="dict[Any, Any] | set[Any]")

# Below this many entries at its peak a map's table is small: not worth a copy.
WORTH_COMPACTING = 64


def compacted(container: C) -> C:
    """A copy of `container` (a dict, OrderedDict, Counter or set) with a table sized for its
    entries, in the same order."""
    return type(container)(container)


class Peak:
    """The most entries a map held since it was last compacted: `due(now)` says when it has
    dropped to an eighth of that (amortised: each copy is paid for by the removals before it)."""

    __slots__ = ("most",)

    def __init__(self) -> None:
        self.most = 0

    def grew(self, size: int) -> None:
        if size > self.most:
            self.most = size

    def due(self, size: int) -> bool:
        if self.most < WORTH_COMPACTING or size * 8 > self.most:
            return False
        self.most = size
        return True
