"""openai-agents' `SandboxAgent` on toolroute: a sandbox client whose sessions run every command
as the allowlist's `bash` and every patch as its `apply_patch`, confined to the session's
workspace as toolroute's built-ins are.

    from toolroute.adapters.agents_sandbox import ToolrouteSandboxClient, capabilities

    agent = SandboxAgent(name="coder", model=..., capabilities=capabilities())
    run_config = RunConfig(sandbox=SandboxRunConfig(client=ToolrouteSandboxClient()))

The SDK's own local backend, `unix_local`, runs commands on the host with the host's environment
and applies a multi-file patch one file at a time. Here each session's commands run under the
context the client makes for its workspace (by default: bubblewrap or Landlock required, the
minimal host view, no network, no host secrets in the environment), its files are read and
written beneath the workspace by descriptor and replaced atomically, and the `apply_patch` tool
of `capabilities()` applies all of a call's operations or none (V4A rules). Interactive commands
(`exec_command` / `write_stdin`) are background processes of the allowlist's `bash`: their
stdin is a pipe, not a terminal (docs/native.md lists this and the other differences).
"""

from __future__ import annotations

import asyncio
import io
import os
import shlex
import stat
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolroute._core import read_file_head, write_file_bytes
from toolroute._twins import run_async
from toolroute.adapters._native import PatchOperation, apply_operations, read_new_output, run_command
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools
from toolroute.context import BuiltInToolContext, ToolLimits, builtin_tool_context
from toolroute.errors import PathExistsError, PathNotFoundError, ToolError
from toolroute.request import ToolRequest
from toolroute.router import ToolRouter

agents = require("agents", "agents", package="openai-agents")

from agents.sandbox.capabilities import Capability, Compaction, Filesystem, Shell  # noqa: E402
from agents.sandbox.capabilities.filesystem import FilesystemToolSet  # noqa: E402
from agents.sandbox.capabilities.tools.apply_patch_tool import SandboxApplyPatchTool  # noqa: E402
from agents.sandbox.capabilities.tools.view_image import ViewImageTool  # noqa: E402
from agents.sandbox.errors import (  # noqa: E402
    ApplyPatchDiffError,
    ExecTimeoutError,
    ExecTransportError,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
    WorkspaceStartError,
)
from agents.sandbox.manifest import Manifest  # noqa: E402
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession  # noqa: E402
from agents.sandbox.session.dependencies import Dependencies  # noqa: E402
from agents.sandbox.session.manager import Instrumentation  # noqa: E402
from agents.sandbox.session.pty_types import (  # noqa: E402
    PTY_PROCESSES_MAX,
    PtyExecUpdate,
    allocate_pty_process_id,
    clamp_pty_yield_time_ms,
    process_id_to_prune_from_meta,
    resolve_pty_write_yield_time_ms,
    truncate_text_by_tokens,
)
from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions  # noqa: E402
from agents.sandbox.session.sandbox_session import SandboxSession  # noqa: E402
from agents.sandbox.session.sandbox_session_state import SandboxSessionState  # noqa: E402
from agents.sandbox.session.workspace_payloads import coerce_write_payload  # noqa: E402
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec, resolve_snapshot  # noqa: E402
from agents.sandbox.types import ExecResult, User  # noqa: E402
from agents.sandbox.util.blocking_io import run_blocking_workspace_io  # noqa: E402
from agents.sandbox.util.tar_utils import (  # noqa: E402
    UnsafeTarMemberError,
    safe_extract_tarfile,
    should_skip_tar_member,
)
from agents.tool import ToolOutputImage  # noqa: E402

BACKEND_ID = "toolroute"
BUILT_INS = ("bash", "apply_patch", "read_file")  # what a session runs through the allowlist
DEFAULT_MANIFEST_ROOT = str(Manifest.model_fields["root"].default)
# The SDK cuts a command's output to the model's max_output_tokens itself; a session's exec
# keeps this much per call (its own output cap), so the SDK's listings are not cut short.
EXEC_OUTPUT_CHARS = 4 * 1024 * 1024
SPOOL_BYTES = 64 * 1024 * 1024  # a persisted workspace beyond this goes to a temporary file
POLL_FIRST, POLL_MOST = 0.005, 0.05  # seconds between reads of an interactive command's output

ContextFactory = Callable[[Path], BuiltInToolContext]


def default_context(workspace: Path) -> BuiltInToolContext:
    """Commands confined to `workspace` (bubblewrap or Landlock, refused where neither works),
    the minimal host view, no network, the default environment allowlist (no host secrets)."""
    return BuiltInToolContext(
        workspace,
        sandbox="on",
        sandbox_view="minimal",
        limits=ToolLimits(max_output_chars=EXEC_OUTPUT_CHARS),
    )


class ToolrouteSandboxClientOptions(BaseSandboxClientOptions):
    """Options of a fresh session; what confines it is the client's (trusted runtime), not
    these (a resumed state may come from anywhere)."""

    type: Literal["toolroute"] = "toolroute"


class ToolrouteSandboxSessionState(SandboxSessionState):
    type: Literal["toolroute"] = "toolroute"
    workspace_root_owned: bool = False


@dataclass
class _Interactive:
    """An `exec_command` still running: a background process of the allowlist's `bash`."""

    process: str
    stdin_open: bool
    offsets: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})
    pending: str = ""  # output read but not yet returned (collected after a deadline)
    last_used: float = field(default_factory=time.monotonic)
    exit_code: int | None = None


class ToolrouteSandboxSession(BaseSandboxSession):
    """A session whose workspace is `state.manifest.root`: commands, patches and files through
    toolroute, under the context the client's factory makes for that folder."""

    state: ToolrouteSandboxSessionState

    def __init__(self, *, state: ToolrouteSandboxSessionState, tools: ExposedTools, context: ContextFactory) -> None:
        self.state = state
        self.tools = tools
        self._make_context = context
        self._context: BuiltInToolContext | None = None
        self._running = False
        self._interactive: dict[int, _Interactive] = {}
        self._interactive_lock = asyncio.Lock()

    # ---- the context, and calls through the allowlist ---------------------------------------

    @property
    def context(self) -> BuiltInToolContext:
        """The workspace's context, made once the folder exists."""
        if self._context is None:
            root = Path(self.state.manifest.root)
            context = self._make_context(root)
            if context.workspace != root.resolve():
                raise ValueError(
                    f"the context factory gave a context for {context.workspace}, not for the session's "
                    f"workspace {root}"
                )
            self._context = context
        return self._context

    async def _call(self, name: str, arguments: Mapping[str, Any]) -> CallOutcome:
        with builtin_tool_context(self.context):
            return await self.tools.aexecute(name, dict(arguments))

    async def _environment(self) -> dict[str, str]:
        """The manifest's variables for every command, and HOME at the workspace."""
        env = await self.state.manifest.environment.resolve()
        return {**env, "HOME": str(self.context.workspace)}

    # ---- lifecycle --------------------------------------------------------------------------

    async def _prepare_backend_workspace(self) -> None:
        workspace = Path(self.state.manifest.root)
        try:
            await run_blocking_workspace_io(lambda: workspace.mkdir(mode=0o700, parents=True, exist_ok=True))
            self.context  # noqa: B018 - opens the roots now, so a bad workspace fails the start
        except (OSError, ValueError, ToolError) as exc:
            raise WorkspaceStartError(path=workspace, cause=exc) from exc

    async def _after_start(self) -> None:
        self._running = True

    async def _after_start_failed(self) -> None:
        self._running = False

    async def _after_shutdown(self) -> None:
        await self.pty_terminate_all()
        self._running = False

    async def running(self) -> bool:
        return self._running

    async def _apply_manifest(self, *, only_ephemeral: bool = False, provision_accounts: bool = True) -> Any:
        _refuse_unsupported(self.state.manifest)
        return await super()._apply_manifest(only_ephemeral=only_ephemeral, provision_accounts=provision_accounts)

    async def provision_manifest_accounts(self) -> None:
        _refuse_unsupported(self.state.manifest)

    def _should_compute_snapshot_fingerprint_on_persist(self) -> bool:
        # The SDK's fingerprint helper lives in /tmp outside the workspace, which a confined
        # session neither writes nor reads back; a resume restores the snapshot instead.
        return False

    # ---- commands ---------------------------------------------------------------------------

    def _prepare_exec_command(
        self, *command: str | Path, shell: bool | list[str], user: str | User | None
    ) -> list[str]:
        if user:
            raise ValueError(
                "a toolroute sandbox session runs every command as its context says (one identity); "
                "commands as another user are not supported"
            )
        return super()._prepare_exec_command(*command, shell=["sh", "-c"] if shell is True else shell, user=None)

    async def _exec_internal(self, *command: str | Path, timeout: float | None = None) -> ExecResult:
        argv = [str(part) for part in command]
        with builtin_tool_context(self.context):
            run = await run_async(
                run_command(self.tools, "exec " + shlex.join(argv), timeout=timeout, env=await self._environment())
            )
        if run.refused is not None:
            raise ExecTransportError(command=argv, message=run.refused, context={"reason": run.refused})
        if run.timed_out:
            raise ExecTimeoutError(command=argv, timeout_s=timeout)
        return ExecResult(
            stdout=run.stdout.encode("utf-8", "surrogateescape"),
            stderr=run.stderr.encode("utf-8", "surrogateescape"),
            exit_code=run.exit_code,
        )

    def supports_pty(self) -> bool:
        return True

    async def pty_exec_start(
        self,
        *command: str | Path,
        timeout: float | None = None,
        shell: bool | list[str] = True,
        user: str | User | None = None,
        tty: bool = False,
        yield_time_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> PtyExecUpdate:
        argv = self._prepare_exec_command(*command, shell=shell, user=user)
        arguments = {
            "action": "start",
            "command": "exec " + shlex.join(argv),
            "env": await self._environment(),
            # Without a terminal asked for, stdin is closed at once (end of file), as a
            # command run from a non-interactive shell would find it.
            "close_stdin": not tty,
        }
        started = await self._call("bash", arguments)
        if started.is_error or not isinstance(started.trace, dict):
            raise ExecTransportError(command=argv, message=started.text, context={"reason": started.text})
        entry = _Interactive(process=str(started.trace["processId"]), stdin_open=tty)
        async with self._interactive_lock:
            session_id = allocate_pty_process_id(set(self._interactive))
            pruned = self._prune_interactive()
            self._interactive[session_id] = entry
        if pruned is not None:
            await self._stop(pruned)
        yield_ms = clamp_pty_yield_time_ms(10_000 if yield_time_s is None else int(yield_time_s * 1000))
        return await self._update(session_id, entry, yield_ms, max_output_tokens)

    async def pty_write_stdin(
        self,
        *,
        session_id: int,
        chars: str,
        yield_time_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> PtyExecUpdate:
        async with self._interactive_lock:
            entry = self._resolve_pty_session_entry(pty_processes=self._interactive, session_id=session_id)
        if chars:
            if not entry.stdin_open:
                raise RuntimeError("stdin is not available for this process")
            await self._call("bash", {"action": "write", "process_id": entry.process, "input": chars})
        yield_ms = 250 if yield_time_s is None else int(yield_time_s * 1000)
        yield_ms = resolve_pty_write_yield_time_ms(yield_time_ms=yield_ms, input_empty=chars == "")
        entry.last_used = time.monotonic()
        return await self._update(session_id, entry, yield_ms, max_output_tokens)

    async def pty_terminate_all(self) -> None:
        async with self._interactive_lock:
            entries = list(self._interactive.values())
            self._interactive.clear()
        for entry in entries:
            await self._stop(entry)

    async def _update(
        self, session_id: int, entry: _Interactive, yield_ms: int, max_tokens: int | None
    ) -> PtyExecUpdate:
        """The command's output until it ends or `yield_ms` pass, in the order it was read."""
        deadline = time.monotonic() + yield_ms / 1000
        text, entry.pending = entry.pending, ""
        pause = POLL_FIRST
        while True:
            with builtin_tool_context(self.context):
                new = await run_async(read_new_output(self.tools, entry.process, entry.offsets))
            text += new.stdout + new.stderr
            if not new.running:
                entry.exit_code = new.exit_code if new.error is None else -1
                if new.error is not None:
                    text += new.error
                break
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(pause, max(deadline - time.monotonic(), 0)))
            pause = min(pause * 2, POLL_MOST)
        truncated, original_tokens = truncate_text_by_tokens(text, max_tokens)
        live: int | None = session_id
        if not new.running:
            async with self._interactive_lock:
                self._interactive.pop(session_id, None)
            live = None
        return PtyExecUpdate(
            process_id=live,
            output=truncated.encode("utf-8", "surrogateescape"),
            exit_code=entry.exit_code,
            original_token_count=original_tokens,
        )

    def _prune_interactive(self) -> _Interactive | None:
        if len(self._interactive) < PTY_PROCESSES_MAX:
            return None
        meta = [(sid, e.last_used, e.exit_code is not None) for sid, e in self._interactive.items()]
        victim = process_id_to_prune_from_meta(meta)
        return None if victim is None else self._interactive.pop(victim, None)

    async def _stop(self, entry: _Interactive) -> None:
        await self._call("bash", {"action": "stop", "process_id": entry.process})

    # ---- files: beneath the workspace by descriptor, written atomically ---------------------

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        self._refuse_user(user)
        return io.BytesIO(await self._read(path, self.context.limits.max_file_bytes, whole=True))

    async def _read_bounded(self, path: Path, *, max_bytes: int) -> bytes:
        return await self._read(path, max_bytes, whole=False)

    async def _read(self, path: Path, max_bytes: int, *, whole: bool) -> bytes:
        target = self.normalize_path(path)
        try:
            _, data, size = await run_blocking_workspace_io(
                read_file_head, self.context.confinement, str(target), max_bytes
            )
        except PathNotFoundError as exc:
            raise WorkspaceReadNotFoundError(path=Path(path), cause=exc) from exc
        except ToolError as exc:
            raise WorkspaceArchiveReadError(path=Path(path), context={"reason": str(exc)}, cause=exc) from exc
        if whole and size > len(data):
            reason = f"the file is {size} bytes, over this session's read limit of {max_bytes}"
            raise WorkspaceArchiveReadError(path=Path(path), context={"reason": reason})
        return bytes(data)

    async def view_image(self, path: Path, shown: str) -> ToolOutputImage | str:
        """`view_image`'s answer: the image as the allowlist's read_file shows it (within the
        providers' limits), or why not, in the SDK tool's own words."""
        outcome = await self._call("read_file", {"path": str(self.normalize_path(path))})
        if outcome.is_error:
            if outcome.text.endswith(": no such file"):  # PathNotFoundError's wording
                return f"image path `{shown}` was not found"
            return f"unable to read image at `{shown}`: {outcome.text}"
        image = next((b for b in outcome.content or () if getattr(b, "type", None) == "image"), None)
        if image is None or not isinstance(outcome.trace, dict) or outcome.trace.get("kind") != "image":
            return f"image path `{shown}` is not a supported image file"
        return ToolOutputImage(image_url=f"data:{image.mime_type};base64,{image.data}")

    async def write(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        self._refuse_user(user)
        await self._write(path, data, "overwrite")

    async def _write_new_file(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        # No-clobber: the rename that publishes the file fails if the name was taken meanwhile.
        self._refuse_user(user)
        await self._write(path, data, "create")

    async def _write(self, path: Path, data: io.IOBase, mode: str) -> None:
        payload = coerce_write_payload(path=path, data=data)
        target = self.normalize_path(path, for_write=True)
        limit = self.context.limits.max_write_bytes
        content = payload.stream.read(limit + 1)
        if len(content) > limit:
            reason = f"more than this session's write limit of {limit} bytes"
            raise WorkspaceArchiveWriteError(path=target, context={"reason": reason})
        try:
            await run_blocking_workspace_io(
                write_file_bytes, self.context.confinement, str(target), bytes(content), mode, limit
            )
        except PathExistsError as exc:
            raise FileExistsError(str(exc)) from exc
        except ToolError as exc:
            raise WorkspaceArchiveWriteError(path=target, context={"reason": str(exc)}, cause=exc) from exc

    def _refuse_user(self, user: str | User | None) -> None:
        if user:
            raise ValueError("a toolroute sandbox session reads and writes as one identity; user= is not supported")

    # ---- patches: all of a call's operations or none ---------------------------------------

    async def apply_patch(self, operations: Any, *, patch_format: Any = "v4a") -> str:
        if patch_format != "v4a":
            return await super().apply_patch(operations, patch_format=patch_format)
        listed = operations if isinstance(operations, list) else [operations]
        ops = [self._workspace_operation(PatchOperation.of(op)) for op in listed]
        with builtin_tool_context(self.context):
            outcome = await run_async(apply_operations(self.tools, ops))
        if outcome.is_error:
            raise ApplyPatchDiffError(message=outcome.text)
        return outcome.text

    def _workspace_operation(self, op: PatchOperation) -> PatchOperation:
        """`op` with its paths as the session's path policy places them."""
        path = str(self.normalize_path(op.path, for_write=True))
        move_to = None if op.move_to is None else str(self.normalize_path(op.move_to, for_write=True))
        return op.model_copy(update={"path": path, "move_to": move_to})

    # ---- snapshots --------------------------------------------------------------------------

    async def persist_workspace(self) -> io.IOBase:
        root = self.context.workspace
        skip = self._persist_workspace_skip_relpaths()
        try:
            return await run_blocking_workspace_io(_archive, root, skip)
        except (tarfile.TarError, OSError) as exc:
            raise WorkspaceArchiveReadError(path=root, cause=exc) from exc

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        root = Path(self.state.manifest.root)

        def extract() -> None:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            with tarfile.open(fileobj=data, mode="r:*") as tar:
                safe_extract_tarfile(tar, root=root, allow_external_symlink_targets=False)

        try:
            await run_blocking_workspace_io(extract)
        except UnsafeTarMemberError as exc:
            context = {"reason": exc.reason, "member": exc.member}
            raise WorkspaceArchiveWriteError(path=root, context=context, cause=exc) from exc
        except (tarfile.TarError, OSError) as exc:
            raise WorkspaceArchiveWriteError(path=root, cause=exc) from exc


def _refuse_unsupported(manifest: Manifest) -> None:
    if manifest.users or manifest.groups:
        raise ValueError("a toolroute sandbox session does not provision manifest users or groups")
    if manifest.extra_path_grants:
        raise ValueError(
            "a toolroute sandbox session reaches only its workspace; give the client a context factory "
            "with read_only_roots (or sandbox_writable) for other folders instead of extra_path_grants"
        )


def _archive(root: Path, skip: set[Path]) -> io.IOBase:
    """`root` as a tar of workspace-relative members, walked by descriptor (a folder swapped for
    a symlink mid-walk is not followed out): folders, regular files, and symlinks whose target
    stays in the workspace; other symlinks and special files are left out."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - handed to the caller
    with tarfile.open(fileobj=spool, mode="w") as tar:
        for folder, dirs, files, folder_fd in os.fwalk(root, follow_symlinks=False):
            relative = Path(folder).relative_to(root)
            if folder == str(root):
                tar.addfile(_folder_info(".", os.fstat(folder_fd)))
            for name in sorted([*dirs, *files]):
                member = "./" + (relative / name).as_posix()
                if should_skip_tar_member(member, skip_rel_paths=skip, root_name=None):
                    if name in dirs:
                        dirs.remove(name)  # not descended into either
                    continue
                _add_member(tar, member, name, folder_fd, relative)
    spool.seek(0)
    return spool


def _folder_info(member: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(member)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, stat.S_IMODE(st.st_mode), int(st.st_mtime)
    return info


def _add_member(tar: tarfile.TarFile, member: str, name: str, folder_fd: int, relative: Path) -> None:
    try:
        st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return  # removed while walking
    if stat.S_ISDIR(st.st_mode):
        tar.addfile(_folder_info(member, st))
    elif stat.S_ISLNK(st.st_mode):
        target = os.readlink(name, dir_fd=folder_fd)
        if _stays_inside(relative, target):
            info = tarfile.TarInfo(member)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, int(st.st_mtime)
            tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        # O_NONBLOCK: a file swapped for a FIFO after the stat does not hang the open.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=folder_fd)
        except (FileNotFoundError, OSError):
            return
        with os.fdopen(fd, "rb") as handle:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                return
            info = tarfile.TarInfo(member)
            info.size, info.mode, info.mtime = opened.st_size, stat.S_IMODE(opened.st_mode), int(opened.st_mtime)
            tar.addfile(info, handle)


def _stays_inside(relative: Path, target: str) -> bool:
    """Whether a symlink in folder `relative` pointing at `target` stays in the workspace."""
    if target.startswith("/"):
        return False
    depth = len(relative.parts)
    for part in Path(target).parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return False
    return True


class ToolrouteSandboxClient(BaseSandboxClient[ToolrouteSandboxClientOptions | None]):
    """Sessions on toolroute: each workspace a context made by `context` (default:
    `default_context`), each command and patch a call of `router`'s built-ins (a router of its
    own when not given) through an allowlist of `bash` and `apply_patch` for `user_id`.
    Workspaces the client makes go in `workspaces` (default: the temporary folder)."""

    backend_id = BACKEND_ID
    supports_default_options = True

    def __init__(
        self,
        router: ToolRouter | None = None,
        *,
        context: ContextFactory = default_context,
        workspaces: str | os.PathLike[str] | None = None,
        user_id: str | None = None,
        instrumentation: Instrumentation | None = None,
        dependencies: Dependencies | None = None,
    ) -> None:
        self._owned_router = router is None
        self.router = router if router is not None else ToolRouter()
        self.tools = ExposedTools.of(self.router, ToolRequest(BUILT_INS, user_id=user_id))
        missing = [name for name in BUILT_INS if name not in self.tools]
        if missing:
            raise ValueError(f"the router does not expose {', '.join(missing)}: a sandbox session runs them")
        self._context = context
        self._workspaces = None if workspaces is None else Path(workspaces)
        self._instrumentation = instrumentation if instrumentation is not None else Instrumentation()
        self._dependencies = dependencies

    def _session(self, state: ToolrouteSandboxSessionState) -> SandboxSession:
        inner = ToolrouteSandboxSession(state=state, tools=self.tools, context=self._context)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: ToolrouteSandboxClientOptions | None = None,
    ) -> SandboxSession:
        manifest = manifest if manifest is not None else Manifest()
        _refuse_unsupported(manifest)
        self._validate_manifest_for_create(manifest)
        owned = manifest.root == DEFAULT_MANIFEST_ROOT
        if owned:  # a folder of its own, as unix_local gives a session that names none
            root = tempfile.mkdtemp(prefix="toolroute-sandbox-", dir=self._workspaces)
            manifest = manifest.model_copy(update={"root": root}, deep=True)
        session_id = uuid.uuid4()
        state = ToolrouteSandboxSessionState(
            session_id=session_id,
            manifest=manifest,
            snapshot=resolve_snapshot(snapshot, str(session_id)),
            workspace_root_owned=owned,
        )
        return self._session(state)

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        if not isinstance(state, ToolrouteSandboxSessionState):
            raise TypeError("ToolrouteSandboxClient.resume expects a ToolrouteSandboxSessionState")
        state.assert_path_grants_rebound()
        _refuse_unsupported(state.manifest)
        return self._session(state)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        """Stop the session's commands; remove its workspace if the client made it."""
        inner = session._inner
        if not isinstance(inner, ToolrouteSandboxSession):
            raise TypeError("ToolrouteSandboxClient.delete expects a ToolrouteSandboxSession")
        await inner.pty_terminate_all()
        if inner.state.workspace_root_owned:
            root = Path(inner.state.manifest.root)
            await run_blocking_workspace_io(_remove_tree, root)
        return session

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, ToolrouteSandboxSessionState)

    def close(self) -> None:
        """Close the router the client made (ending every session's background processes)."""
        if self._owned_router:
            self.router.close()


def _remove_tree(root: Path) -> None:
    import shutil

    # rmtree removes by descriptor (it does not follow symlinks out of the tree).
    shutil.rmtree(root, ignore_errors=True)


# ---- the apply_patch tool: one call, one transaction -----------------------------------------


class AtomicApplyPatchTool(SandboxApplyPatchTool):
    """The SDK's sandbox `apply_patch` tool, but a call's operations go to a toolroute session
    together (all applied or none), where the SDK's editor applies them one file at a time.
    On another backend it is the SDK's tool unchanged."""

    async def _on_invoke_tool(self, ctx: Any, raw_input: str) -> str:
        session = getattr(self.session, "_inner", self.session)
        if not isinstance(session, ToolrouteSandboxSession):
            return await super()._on_invoke_tool(ctx, raw_input)
        operations = self.parse_custom_input(raw_input)
        anchored = [self._normalize_operation(op) for op in operations]  # validated, cwd applied
        await session.apply_patch(anchored)
        return "\n".join(PatchOperation.of(op).done() for op in operations)


def atomic_patches(toolset: FilesystemToolSet) -> None:
    """A `Filesystem(configure_tools=...)` hook: its `apply_patch` becomes `AtomicApplyPatchTool`."""
    old = toolset.apply_patch
    toolset.apply_patch = AtomicApplyPatchTool(
        session=old.session,
        user=old.editor.user,
        needs_approval=old.needs_approval,
        on_approval=old.on_approval,
        workspace_scope=old.workspace_scope,
    )


# ---- the view_image tool: read_file's images ----------------------------------------------


class ReadFileViewImageTool(ViewImageTool):
    """The SDK's sandbox `view_image` tool, but on a toolroute session the image is read_file's:
    read confined by descriptor, decoded by Pillow, downscaled to the providers' limits (or
    refused with the reason), where the SDK's own passes any file of up to 10 MB as it is.
    On another backend it is the SDK's tool unchanged."""

    async def _run(self, resolved_path: Path, display_path: str) -> ToolOutputImage | str:
        session = getattr(self.session, "_inner", self.session)
        if not isinstance(session, ToolrouteSandboxSession):
            return await super()._run(resolved_path, display_path)
        return await session.view_image(resolved_path, display_path)


def toolroute_files(toolset: FilesystemToolSet) -> None:
    """A `Filesystem(configure_tools=...)` hook: atomic patches (`atomic_patches`) and
    read_file's images (`ReadFileViewImageTool`)."""
    atomic_patches(toolset)
    old = toolset.view_image
    toolset.view_image = ReadFileViewImageTool(
        session=old.session, user=old.user, needs_approval=old.needs_approval, workspace_scope=old.workspace_scope
    )


def capabilities(extra: Sequence[Capability] = ()) -> list[Capability]:
    """The SDK's default capabilities (filesystem, shell, compaction), with atomic patches and
    read_file's images."""
    return [Filesystem(configure_tools=toolroute_files), Shell(), Compaction(), *extra]


__all__ = [
    "AtomicApplyPatchTool",
    "ReadFileViewImageTool",
    "ToolrouteSandboxClient",
    "ToolrouteSandboxClientOptions",
    "ToolrouteSandboxSession",
    "ToolrouteSandboxSessionState",
    "atomic_patches",
    "capabilities",
    "default_context",
    "toolroute_files",
]
