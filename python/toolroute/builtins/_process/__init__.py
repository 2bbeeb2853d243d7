"""Process plumbing of the bash tool: spawning, group kill, reaping, bounded buffers, the sandbox
(bubblewrap, or Landlock + seccomp), the host's signals and death.

Kept in Python on purpose (see docs/bash.md): the hot path is a poll loop over three fds, and
measured overhead against a plain `subprocess.run` is within the target, so Rust would add an FFI
layer without making anything faster that matters.
"""

from toolroute.builtins._process.command import CommandResult, run_command
from toolroute.builtins._process.environment import command_environment
from toolroute.builtins._process.pump import CommandSpec, Outcome, SpawnError
from toolroute.builtins._process.sandbox import SandboxUnavailable, landlock_abi
from toolroute.builtins._process.table import (
    BackgroundProcess,
    LostProcess,
    Owner,
    ProcessTable,
    StdinUnavailable,
    TooManyProcesses,
    UnknownProcess,
)

__all__ = [
    "BackgroundProcess",
    "CommandResult",
    "CommandSpec",
    "LostProcess",
    "Outcome",
    "Owner",
    "ProcessTable",
    "SandboxUnavailable",
    "SpawnError",
    "StdinUnavailable",
    "TooManyProcesses",
    "UnknownProcess",
    "command_environment",
    "landlock_abi",
    "run_command",
]
