"""Checkpoints of a context's workspace and rewind to them (docs/safe-editing.md, "Checkpoints and rewind").

A checkpoint is the whole workspace as it is when taken (the Rust crate `toolroute-checkpoints`
scans it and keeps what changed since the last one, deduplicated, in a store outside the
workspace), so a rewind undoes every change since: the file tools', a command's, the user's.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from toolroute._core import Checkpoints as _CoreCheckpoints
from toolroute._core import Confinement


@dataclass(frozen=True)
class CheckpointLimits:
    """What one workspace's store may hold; past a limit the oldest checkpoints go, and a file
    that still does not fit is not kept (a rewind that would need it names it)."""

    max_checkpoints: int = 100  # past it, the oldest go down to nine tenths of it
    max_store_bytes: int = 1 << 30
    max_file_bytes: int = 16 << 20  # a larger file's bytes are not kept
    max_paths: int = 200_000  # a workspace with more paths cannot be checkpointed

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"CheckpointLimits.{name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: `uncovered` names the files whose bytes it does not hold, and why."""

    id: int
    label: str
    taken_ns: int
    files: int
    uncovered: tuple[tuple[str, str], ...] = ()
    added_bytes: int = 0  # what the store grew by for it (0 when listed)

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Checkpoint:
        return cls(
            id=raw["id"],
            label=raw["label"],
            taken_ns=raw["taken_ns"],
            files=raw["files"],
            uncovered=tuple((p, why) for p, why in raw["uncovered"]),
            added_bytes=raw["added_bytes"],
        )


# What no checkpoint covers, said with every rewind (a command may have changed it).
OUTSIDE_NOTE = "Not covered by checkpoints: anything outside the workspace, and .git folders."


@dataclass(frozen=True)
class Rewind:
    """What a rewind did: files written back, paths removed, what could not be put back (with
    why), and the checkpoint taken just before it (rewind to `undo` to undo the rewind)."""

    checkpoint: int
    restored: tuple[str, ...]
    removed: tuple[str, ...]
    unrestorable: tuple[tuple[str, str], ...]
    undo: int

    def describe(self) -> str:
        """The report as a model or a user reads it."""
        lines = [
            f"Rewound to checkpoint {self.checkpoint}: {len(self.restored)} file(s) restored, "
            f"{len(self.removed)} path(s) removed (undo: rewind to checkpoint {self.undo})."
        ]
        lines += [f"  restored {p}" for p in self.restored]
        lines += [f"  removed {p}" for p in self.removed]
        lines += [f"  NOT restored {p}: {why}" for p, why in self.unrestorable]
        lines.append(OUTSIDE_NOTE)
        return "\n".join(lines)


def default_state_dir(workspace: Path, user_id: str | None) -> Path:
    """Where a workspace's checkpoints are kept by default: one folder per workspace and user
    under `$XDG_STATE_HOME/toolroute/checkpoints` (else `~/.local/state/...`)."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    key = hashlib.sha256(f"{workspace}\0{user_id or ''}".encode()).hexdigest()[:24]
    return state / "toolroute" / "checkpoints" / key


class Confined(Protocol):
    """What the checkpoints of a workspace need of its owner (a `BuiltInToolContext`, which holds
    them: this module knows nothing of contexts, so the two make no circle)."""

    @property
    def confinement(self) -> Confinement: ...


class WorkspaceCheckpoints:
    """The checkpoints of one context's workspace (`BuiltInToolContext.checkpoints`), kept in
    `state_dir`; the store is opened on first use, confined as the context is."""

    def __init__(self, context: Confined, state_dir: Path, limits: CheckpointLimits) -> None:
        self._context = context
        self.state_dir = state_dir
        self.limits = limits
        self._core: _CoreCheckpoints | None = None
        self._opening = threading.Lock()

    def _store(self) -> _CoreCheckpoints:
        if self._core is None:
            with self._opening:
                if self._core is None:
                    self._core = _CoreCheckpoints(
                        self._context.confinement,
                        self.state_dir,
                        self.limits.max_checkpoints,
                        self.limits.max_store_bytes,
                        self.limits.max_file_bytes,
                        self.limits.max_paths,
                    )
        return self._core

    def take(self, label: str = "") -> Checkpoint:
        """Take a checkpoint of the workspace now."""
        return Checkpoint.of(self._store().take(label))

    def list(self) -> list[Checkpoint]:
        """Every checkpoint held, oldest first."""
        return [Checkpoint.of(raw) for raw in self._store().list()]

    def rewind(self, checkpoint_id: int) -> Rewind:
        """Put the workspace back as it was at `checkpoint_id`, all or nothing."""
        raw = self._store().rewind(checkpoint_id)
        return Rewind(
            checkpoint=checkpoint_id,
            restored=tuple(raw["restored"]),
            removed=tuple(raw["removed"]),
            unrestorable=tuple((p, why) for p, why in raw["unrestorable"]),
            undo=raw["undo"],
        )

    @property
    def store_bytes(self) -> int:
        """Bytes the store holds."""
        return self._store().store_bytes
