"""The built-in tool context: workspace root, read-only roots and limits, held per task/thread.

The spec keeps a thread-local stack; contextvars give each thread *and* each asyncio task its own
stack, so parallel tool calls never see each other's context.
"""

from __future__ import annotations

import contextvars
import ipaddress
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, get_args

from toolroute._core import Confinement, FileSession
from toolroute.checkpoints import CheckpointLimits, WorkspaceCheckpoints, default_state_dir
from toolroute.diagnostics import Diagnostics

# How bash confines commands (docs/bash.md): "off"; "auto", the best available here or none;
# "on", the best available or refuse to run; "bubblewrap" or "landlock", exactly that one.
SandboxMode = Literal["off", "auto", "on", "bubblewrap", "landlock"]
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
# What a confined command can read (docs/bash.md, "What a command sees"): "host", the whole host
# read-only; "minimal", the system folders, the workspace and the declared roots, nothing else.
SandboxView = Literal["host", "minimal"]
SANDBOX_VIEWS: tuple[str, ...] = get_args(SandboxView)
# How hard file writes work to survive a power loss (docs/files.md, "Durability"); a process
# crash is survived at every level.
Durability = Literal["none", "file", "full"]
DURABILITIES: tuple[str, ...] = get_args(Durability)
# What network a confined command gets (docs/bash.md, "Network"): "none"; "internet", a network
# namespace of its own whose user-mode NAT (pasta) reaches public addresses only; "host", the
# host's own network namespace (its loopback services, private networks, cloud metadata: for a
# local user's own agent only). An allowlist is a tuple of domain patterns instead of a mode.
NetworkMode = Literal["none", "internet", "host"]
NETWORK_MODES: tuple[str, ...] = get_args(NetworkMode)
SandboxNetwork = NetworkMode | tuple[str, ...]
_DOMAIN_PATTERN = re.compile(r"(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")


def network_policy(value: bool | str | Sequence[str]) -> SandboxNetwork:
    """`sandbox_network` as the context keeps it. True means "internet" (never the host's own
    namespace: that is only ever asked for by name), False "none"; a sequence of domain patterns
    (`pypi.org`, `*.pythonhosted.org`) is an allowlist, enforced by a proxy."""
    if value is True:
        return "internet"
    if value is False:
        return "none"
    if isinstance(value, str):
        if value not in NETWORK_MODES:
            raise ValueError(
                f"sandbox_network must be one of {', '.join(NETWORK_MODES)}, a bool or a sequence of domain "
                f"patterns; got {value!r}"
            )
        return value  # type: ignore[return-value]
    patterns = tuple(dict.fromkeys(p.strip().lower().rstrip(".") for p in value))
    if not patterns:
        raise ValueError("an empty network allowlist would allow nothing: pass sandbox_network=False for no network")
    for pattern in patterns:
        if len(pattern) > 253 or not _DOMAIN_PATTERN.fullmatch(pattern):
            raise ValueError(
                f"network allowlist entry {pattern!r} is not a domain name or a '*.' wildcard over one "
                "(e.g. pypi.org, *.pythonhosted.org)"
            )
    return patterns


@dataclass(frozen=True)
class ToolLimits:
    """Hard limits every built-in tool enforces (never advisory)."""

    max_read_lines: int = 2000  # lines returned by one read_file call
    max_line_chars: int = 2000  # a longer line is cut with a marker
    max_output_chars: int = 30_000  # whole tool output sent back to the model
    max_file_bytes: int = 20 * 1024 * 1024  # largest file read, edited or patched
    max_write_bytes: int = 20 * 1024 * 1024  # largest content written at once
    command_timeout: float = 120.0  # seconds, default for bash exec
    max_command_timeout: float = 600.0  # seconds, the most a call may ask for
    max_background_processes: int = 8  # running at once per context owner
    log_buffer_bytes: int = 1024 * 1024  # ring buffer per stream of a background process
    agents_md_max_bytes: int = 64 * 1024  # AGENTS.md size cap
    # read_file's images (docs/files.md, "Images and PDFs"): the longest edge a model is shown
    # (Anthropic's limit once a request holds over 20 images; OpenAI fits high detail in 2048),
    # the bytes of one image (Anthropic takes 5 MiB of base64 per image: 3.75 MiB of bytes), and
    # the pixels decoded at most (a decompression bomb is refused: 4 bytes a pixel, 200 MB).
    max_image_edge: int = 2000
    max_image_bytes: int = 5 * 1024 * 1024 * 3 // 4
    max_image_pixels: int = 50_000_000
    max_pdf_pages: int = 20  # pages of a PDF one read_file call returns (text, and images when asked)

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if value <= 0:
                raise ValueError(f"ToolLimits.{name} must be positive, got {value!r}")
        if self.command_timeout > self.max_command_timeout:
            raise ValueError("ToolLimits.command_timeout exceeds max_command_timeout")


@dataclass(frozen=True)
class BuiltInToolContext:
    """Where built-in tools may act, and how much they may do."""

    workspace_root: Path
    read_only_roots: tuple[Path, ...] = ()
    limits: ToolLimits = field(default_factory=ToolLimits)
    # The host variables commands get: None is bash's DEFAULT_ENV_ALLOWLIST (no secrets); a tuple
    # passes only these names or shell patterns (`LC_*`); ("*",) passes the whole environment.
    env_allowlist: tuple[str, ...] | None = None
    # True when commands are confined (sandbox != "off"); kept for the older boolean API.
    sandbox_writes: bool = False
    # Who the context acts for; background processes are visible only to the same owner.
    user_id: str | None = None
    sandbox: SandboxMode = "off"
    # Under a sandbox: the network commands get (`network_policy`), the resolver the network's
    # DNS asks (None: the host's), and folders writable beside the workspace.
    sandbox_network: SandboxNetwork = "none"
    sandbox_dns: str | None = None
    sandbox_writable: tuple[Path, ...] = ()
    # Under a sandbox: what commands can read, paths hidden beside the built-in list (minimal
    # view), and the uid (and gid) they run as (None: the host's own; needs root to differ).
    sandbox_view: SandboxView = "host"
    sandbox_hidden: tuple[Path, ...] = ()
    sandbox_uid: int | None = None
    # fsyncs of file writes: none, file (each new file) or full (files, then each folder once).
    durability: Durability = "full"
    # The stale-read guard (docs/safe-editing.md, "The stale-read guard"): what this session last read or
    # wrote of each file; a rewrite of a file changed since is refused. One per context unless
    # the host passes one (to share it across contexts of one conversation, or strict); None
    # when the host turned the guard off.
    file_session: FileSession | None = field(default=None, compare=False)
    # Checkpoints of the workspace (docs/safe-editing.md, "Checkpoints and rewind"): where the store is
    # kept (outside the workspace; None: under $XDG_STATE_HOME, per workspace and user) and its limits.
    checkpoint_dir: Path | None = None
    checkpoint_limits: CheckpointLimits = field(default_factory=CheckpointLimits)
    # Checkers run on the files the file tools change (docs/safe-editing.md, "Diagnostics after an edit").
    diagnostics: Diagnostics | None = None

    def __init__(
        self,
        workspace_root: str | os.PathLike[str],
        read_only_roots: Sequence[str | os.PathLike[str]] = (),
        limits: ToolLimits | None = None,
        env_allowlist: Sequence[str] | None = None,
        sandbox_writes: bool = False,
        user_id: str | None = None,
        sandbox: SandboxMode | None = None,
        sandbox_network: bool | str | Sequence[str] = False,
        sandbox_writable: Sequence[str | os.PathLike[str]] = (),
        durability: Durability = "full",
        sandbox_view: SandboxView = "host",
        sandbox_hidden: Sequence[str | os.PathLike[str]] = (),
        sandbox_uid: int | None = None,
        file_session: FileSession | None = None,
        guard_stale_reads: bool = True,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_limits: CheckpointLimits | None = None,
        diagnostics: Diagnostics | None = None,
        sandbox_dns: str | None = None,
    ) -> None:
        """`sandbox_writes=True` without `sandbox` means `sandbox="on"`. `guard_stale_reads=False`
        turns the stale-read guard off; `file_session` shares one (or a strict one)."""
        mode: SandboxMode = sandbox if sandbox is not None else ("on" if sandbox_writes else "off")
        if mode not in SANDBOX_MODES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}; got {mode!r}")
        set_ = object.__setattr__
        set_(self, "workspace_root", Path(workspace_root))
        set_(self, "read_only_roots", tuple(Path(p) for p in read_only_roots))
        set_(self, "limits", limits or ToolLimits())
        set_(self, "env_allowlist", None if env_allowlist is None else tuple(env_allowlist))
        set_(self, "sandbox_writes", mode != "off")
        set_(self, "user_id", user_id)
        set_(self, "sandbox", mode)
        set_(self, "sandbox_network", network_policy(sandbox_network))
        if sandbox_dns is not None and ipaddress.ip_address(sandbox_dns).is_loopback:  # (ValueError: not an address)
            # A command's loopback is its namespace's own: leave it unset, and the host's resolver
            # (a loopback one too) is asked through pasta's mapping.
            raise ValueError(
                f"sandbox_dns {sandbox_dns!r} is a loopback address, which a command's namespace cannot reach"
            )
        set_(self, "sandbox_dns", sandbox_dns)
        set_(self, "sandbox_writable", tuple(Path(p) for p in sandbox_writable))
        if sandbox_view not in SANDBOX_VIEWS:
            raise ValueError(f"sandbox_view must be one of {', '.join(SANDBOX_VIEWS)}; got {sandbox_view!r}")
        if sandbox_uid is not None and (isinstance(sandbox_uid, bool) or not 0 < sandbox_uid < 2**32 - 1):
            raise ValueError(f"sandbox_uid must be a uid above 0, got {sandbox_uid!r}")
        set_(self, "sandbox_view", sandbox_view)
        set_(self, "sandbox_hidden", tuple(Path(p) for p in sandbox_hidden))
        set_(self, "sandbox_uid", sandbox_uid)
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, got {durability!r}")
        set_(self, "durability", durability)
        if file_session is not None and not guard_stale_reads:
            raise ValueError("file_session is the stale-read guard; it cannot be given with guard_stale_reads=False")
        session = (FileSession() if file_session is None else file_session) if guard_stale_reads else None
        set_(self, "file_session", session)
        # Open (and validate) the roots now, so a bad root fails at construction.
        confinement = Confinement(self.workspace_root, list(self.read_only_roots), durability, session)
        _refuse_read_only_around_workspace(confinement)
        set_(self, "confinement", confinement)
        set_(self, "checkpoint_dir", None if checkpoint_dir is None else Path(checkpoint_dir))
        set_(self, "checkpoint_limits", checkpoint_limits or CheckpointLimits())
        set_(self, "diagnostics", diagnostics)

    confinement: Confinement = field(init=False, repr=False, compare=False)

    @cached_property
    def workspace(self) -> Path:
        """The canonical workspace root."""
        return Path(self.confinement.workspace)

    @cached_property
    def checkpoints(self) -> WorkspaceCheckpoints:
        """The workspace's checkpoints (the store opens on first use)."""
        state_dir = self.checkpoint_dir or default_state_dir(self.workspace, self.user_id)
        return WorkspaceCheckpoints(self, state_dir, self.checkpoint_limits)

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """Confine a user-supplied path; raises PathDeniedError when it escapes the roots."""
        return Path(self.confinement.resolve(path, write))

    @classmethod
    def for_cwd(cls, **kwargs: object) -> BuiltInToolContext:
        return cls(Path.cwd(), **kwargs)  # type: ignore[arg-type]


def _refuse_read_only_around_workspace(confinement: Confinement) -> None:
    """A read-only root that contains the workspace would make every write fail: say so now."""
    workspace = Path(confinement.workspace)
    for root in confinement.read_only:
        if workspace == root or workspace.is_relative_to(root):
            raise ValueError(
                f"the read-only root {str(root)!r} contains the workspace root {str(workspace)!r}, so every "
                "write in the workspace would be refused; pass read-only roots beside or inside the workspace, "
                "not around it"
            )


_stack: contextvars.ContextVar[tuple[BuiltInToolContext, ...]] = contextvars.ContextVar(
    "toolroute_builtin_context_stack", default=()
)


def push_builtin_tool_context(context: BuiltInToolContext) -> contextvars.Token[tuple[BuiltInToolContext, ...]]:
    """Push a context for the current thread/task; returns a token for `pop`'s optional check."""
    if not isinstance(context, BuiltInToolContext):
        raise TypeError(f"expected BuiltInToolContext, got {type(context).__name__}")
    return _stack.set((*_stack.get(), context))


def pop_builtin_tool_context() -> BuiltInToolContext | None:
    """Pop the innermost context of the current thread/task (None if the stack is empty)."""
    stack = _stack.get()
    if not stack:
        return None
    _stack.set(stack[:-1])
    return stack[-1]


def current_builtin_tool_context() -> BuiltInToolContext | None:
    stack = _stack.get()
    return stack[-1] if stack else None


@contextmanager
def builtin_tool_context(context: BuiltInToolContext) -> Iterator[BuiltInToolContext]:
    """`with builtin_tool_context(ctx):` pushes for the block and always pops."""
    token = push_builtin_tool_context(context)
    try:
        yield context
    finally:
        _stack.reset(token)
