"""Type stubs for the Rust extension `toolroute._core` (rust/binding): the PyO3 layer over
toolroute's crates. Errors are toolroute's exceptions (`toolroute.errors`); work on files runs
with the GIL released. stubtest holds this file to the built module."""

from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Final, final

# The request types the binding reads attribute by attribute: declared once, in the built-ins.
from toolroute.builtins.glob import GlobRequest
from toolroute.builtins.grep import GrepRequest
from toolroute.builtins.patch_operation import PatchOperation

def generate_api_function_name(service: str, tool: str) -> str:
    """The spec's `generateApiFunctionName(service, tool)`: `service_tool` sanitised to a legal tool name."""

def generate_api_function_names(pairs: list[tuple[str, str]]) -> list[str]:
    """`generate_api_function_name` for many `(service, tool)` pairs in one call."""

def sanitize_tool_name(raw: str) -> str:
    """`raw` made a legal exposed tool name (characters replaced, cut to the length limit)."""

def is_valid_tool_name(name: str) -> bool:
    """Whether `name` is a legal exposed tool name."""

def with_hash_suffix(name: str, raw: str) -> str:
    """`name` cut to fit with a `_` + 8-hex hash of `raw`: the collision-breaking form."""

def encode_user_tool(user_id: str, tool: str) -> str:
    """The exposed user-form name of `user_id`'s `tool` (readable, or the digest form when too long)."""

def validate_user_id(user_id: object) -> None:
    """Raise `ToolArgumentError` (saying `USER_ID_RULE`) unless `user_id` is a valid user id; any
    object is accepted, a non-string or lone surrogate refused like a bad id."""

def has_user_form(name: str) -> bool:
    """Whether `name` has the user form (such a name never falls back to shared tools)."""

def decode_user_tool(name: str) -> tuple[str, str] | None:
    """`(user_id, tool)` of a readable-form user name; None for the digest form or no user form."""

def user_tool_owners(name: str, user_ids: list[str]) -> list[str]:
    """Which of `user_ids` may own the user-form `name` (by its grammar; the table decides)."""

def user_service_key(user_id: str, service_id: str) -> str:
    """`user_{user_id}_service_{service_id}`: the key of a user's own server (spec 5.1)."""

CUT_NOTICE: Final[str]
"""The one wording of a text cut at the output cap (appended where the text is cut)."""
USER_ID_RULE: Final[str]
"""The user-id rule as messages state it."""
PORTABLE: Final[bool]
"""Built without the Linux-only interfaces (another OS, or the `portable` feature)."""

def neutralize_text(text: str) -> str | None:
    """`text` with hidden and terminal-controlling characters made visible (`\\x1b`, `\\u202e`);
    None when it has nothing to escape (the caller keeps its own object). A string holding lone
    surrogates raises `UnicodeEncodeError`."""

def user_service_candidates(key: str, user_id: str | None = None) -> list[tuple[str, str]]:
    """Every `(user id, service id)` split of a `user_{userId}_service_{serviceId}` key (only
    `user_id`'s when given)."""

@final
class ToolKind:
    """A tool's kind, in the spec's precedence: built-in, user MCP, local MCP, function, global MCP."""

    BUILTIN: ClassVar[ToolKind]
    """toolroute's built-in coding tools (precedence 0, first)."""
    USER_MCP: ClassVar[ToolKind]
    """A user's own MCP servers' tools (1)."""
    LOCAL_MCP: ClassVar[ToolKind]
    """The host's local MCP servers' tools (2)."""
    FUNCTION: ClassVar[ToolKind]
    """The host's registered functions (3)."""
    GLOBAL_MCP: ClassVar[ToolKind]
    """Shared global MCP servers' tools (4, last)."""
    def __new__(cls, value: ToolKind | int) -> ToolKind: ...
    @property
    def name(self) -> str:
        """The constant's name, e.g. `"BUILTIN"`."""
    @property
    def value(self) -> int:
        """The precedence level, 0 (built-in) to 4 (global MCP)."""
    @property
    def key(self) -> str:
        """The lower-case key traces, audits and listings use, e.g. `"builtin"`."""
    @property
    def label(self) -> str:
        """A short human label, e.g. `"built-in"`."""
    @property
    def host(self) -> bool:
        """Host-defined kinds (built-in, local MCP, function): their names are reserved."""
    @staticmethod
    def all() -> list[ToolKind]:
        """Every kind, in precedence order."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __int__(self) -> int: ...

@final
class RouteTable:
    """The routing table: exposed names to `(kind, target)`, with name claims that outlive removal
    and each user's own key namespace."""

    def __new__(cls) -> RouteTable: ...
    def insert(
        self, kind: ToolKind, name: str, target: Any, replace: bool = False, identity: str | None = None
    ) -> None:
        """Route `name` to a shared tool of `kind`, claiming the name for `identity` (default
        `"{KIND}:{name}"`) for the table's life."""
    def plan(self, kind: ToolKind, items: list[tuple[str, list[str]]]) -> list[str | None]:
        """Names for a batch of shared newcomers: `items` is `[(identity, [candidate, ...])]`."""
    def plan_user(self, user_id: str, items: list[tuple[str, list[str]]]) -> list[str | None]:
        """Keys for a batch of `user_id`'s newcomers, in that user's own key namespace."""
    def insert_user(self, user_id: str, key: str, target: Any) -> str:
        """Route `user_id`'s `key` to `target`; returns the exposed user-form name."""
    def remove(self, name: str) -> bool:
        """Stop routing a shared name; its claim stays, so it never goes to another tool."""
    def remove_user(self, user_id: str, key: str) -> bool:
        """Stop routing `user_id`'s `key`; False when it was not routed."""
    def forget_user(self, user_id: str) -> bool:
        """Forget `user_id`'s key claims once none of its tools is routed; False while any is."""
    def user_entry(self, name: str) -> tuple[str, str] | None:
        """`(user_id, key)` of a registered user-form name, else None."""
    def holder(self, name: str) -> tuple[str, ToolKind] | None:
        """`(identity, kind)` holding a shared name (routed or not), else None."""
    def resolve(self, name: str, user_id: str | None = None) -> tuple[ToolKind, Any] | None:
        """`(kind, target)` by the spec's precedence, or None when nothing matched."""
    def names(self, kind: ToolKind) -> list[str]:
        """The shared names routed to tools of `kind`."""
    def suggest(self, name: str, user_id: str | None = None, limit: int = 3) -> list[str]:
        """Close names for an error message, never from another tenant's tools."""

@final
class FileSession:
    """One session's stale-read guard (what it last read or wrote of each file), shared by every
    confinement made with it."""

    def __new__(cls, strict: bool = False) -> FileSession: ...
    @property
    def strict(self) -> bool:
        """Whether rewriting a file this session never read is refused."""
    def __len__(self) -> int: ...
    def saw(self, resolved: str | PathLike[str], content: bytes) -> bool:
        """Whether the session last saw `resolved` (a path as `Confinement.resolve` gives it) hold
        exactly `content`."""

@final
class Confinement:
    """The open roots of one context (a workspace and read-only roots); `resolve` confines a
    user-supplied path to them."""

    def __new__(
        cls,
        workspace: str | PathLike[str],
        read_only: list[str | PathLike[str]] = ...,
        durability: str = "full",
        session: FileSession | None = None,
    ) -> Confinement: ...
    @property
    def workspace(self) -> Path:
        """The workspace root (canonical)."""
    @property
    def read_only(self) -> list[Path]:
        """The read-only roots (canonical)."""
    @property
    def durability(self) -> str:
        """How much a write syncs before returning: `none`, `file` or `full`."""
    def resolve(self, path: str, write: bool = False) -> Path:
        """Resolve `path` (relative to the workspace, or absolute); raises `PathDeniedError` when it
        lands outside the roots, or inside a read-only root with `write=True`."""
    def recover(self) -> tuple[int, int]:
        """Finish or clean up writes a crashed process left in the workspace (also done when the
        confinement is made): `(transactions rolled forward, transactions rolled back)`."""

# ---- search: grep and glob (rust/binding/src/search.rs) -------------------------------------------

@final
class GrepResult:
    """The outcome of one grep: counts, skip statistics and the rows, paged on demand."""

    @property
    def total(self) -> int:
        """Rows in output order: lines (and `--` breaks) in content mode, files otherwise."""
    @property
    def files_matched(self) -> int:
        """Files with at least one match."""
    @property
    def match_lines(self) -> int:
        """Matching lines in all files."""
    @property
    def output_mode(self) -> str:
        """`content`, `files_with_matches` or `count`, as requested."""
    @property
    def stats(self) -> dict[str, Any]:
        """What the walk left out: `files`, `ignored`, `hidden`, `binary`, `outside_roots`,
        `errors`, `first_errors`."""
    def paths(self) -> list[str]:
        """Paths of the files with matches, sorted."""
    def rows(self, offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Structured rows `offset..offset+limit` as dicts (path, kind, line, byte_offset, text,
        submatches, truncated; count for file/count rows)."""
    def render(
        self, offset: int, limit: int | None, max_chars: int, max_line_chars: int
    ) -> tuple[str, list[dict[str, Any]]]:
        """rg-style text for rows from `offset`, at most `limit` rows and `max_chars` characters,
        lines cut at `max_line_chars`; the text and the rows it shows (as dicts)."""

@final
class GlobResult:
    """The outcome of one glob: sorted paths, their modification times and skip statistics."""

    def __len__(self) -> int: ...
    def paths(self, offset: int = 0, limit: int | None = None) -> list[str]:
        """Display paths (workspace-relative when inside the workspace), in the requested order."""
    def modified(self, offset: int = 0, limit: int | None = None) -> list[float | None]:
        """Modification times (seconds since the epoch; None when unknown or sorted by path)."""
    @property
    def stats(self) -> dict[str, Any]:
        """What the walk left out, as `GrepResult.stats`."""

@final
class GrepProgress:
    """How many files a running grep has searched, read from another thread (progress reports)."""

    def __init__(self) -> None: ...
    @property
    def files(self) -> int:
        """Files searched so far."""

@final
class CancelFlag:
    """A search's cancel switch, set from another thread: the search stops before its next file
    and at its next read of a file."""

    def __init__(self) -> None: ...
    def cancel(self) -> None:
        """Stop every search this flag was given to."""
    @property
    def cancelled(self) -> bool:
        """Whether `cancel` was called."""

def grep(
    confinement: Confinement,
    request: GrepRequest,
    *,
    max_line_bytes: int,
    threads: int = 0,
    index: bool = True,
    progress: GrepProgress | None = None,
    cancel: CancelFlag | None = None,
) -> GrepResult:
    """Search files under `request.path` (default: the workspace root) for `request.pattern`;
    lines are read up to `max_line_bytes`. `threads` 0 picks the CPUs; `index` lets the grep index
    answer when it can."""

def search_index_warm(
    confinement: Confinement,
    path: str | None = None,
    *,
    timeout: float = 60.0,
    hidden: bool = False,
    no_ignore: bool = False,
) -> bool:
    """Build the grep index for the root holding `path` (with these walk settings) now and wait
    until it is ready; False when it is not ready within `timeout` seconds or cannot be used."""

def search_index_stats(
    confinement: Confinement, path: str | None = None, *, hidden: bool = False, no_ignore: bool = False
) -> dict[str, Any]:
    """What the grep index for the root holding `path` holds: state, files, bytes indexed, memory,
    dirty files, watched folders, watching, queries served, build seconds, restored, texts."""

def glob(
    confinement: Confinement,
    request: GlobRequest,
    *,
    threads: int = 0,
    index: bool = True,
    cancel: CancelFlag | None = None,
) -> GlobResult:
    """List files under `request.path` matching the gitignore-style `request.pattern`."""

def set_search_index_default(name: str, value: float) -> None:
    """Set this process's default for one index setting (`ttl`, `max_live`, `memory`, `texts`,
    `cache_files`, `cache_bytes`, `watch`); its `TOOLROUTE_SEARCH_INDEX_*` variable still wins."""

def search_daemon_serve(name: str) -> bool:
    """Serve as the index daemon under the socket name `name` until unused for its TTL, asked to
    stop, or the socket is taken; False when another daemon already serves that name."""

def search_daemon_command(argv: list[str | PathLike[str]]) -> None:
    """How a process starts the index daemon when none answers (the socket name is added as the
    last argument)."""

def search_daemon_stop() -> bool:
    """Ask this environment's index daemon to end; False when none answered."""

def search_daemon_answered() -> int:
    """Queries of this process that an index daemon answered."""

# --- File tools (rust/binding/src/files.rs): confined reads, atomic writes, edit, apply_patch ---

@final
class FilePage:
    """One page of a text file, as `read_page` returns it."""

    @property
    def resolved(self) -> Path:
        """The path as the kernel resolved it."""
    @property
    def size(self) -> int:
        """The file's size in bytes."""
    @property
    def binary(self) -> str | None:
        """Why the file is not text, if it is not (a known binary format, or NUL bytes)."""
    @property
    def bom(self) -> tuple[str, str] | None:
        """`(codec, label)` of the byte-order mark the file starts with, if any (the body leaves
        the mark out)."""
    @property
    def whole(self) -> bool:
        """Set for UTF-16/32 files (by BOM): `body` is then the whole file (up to the byte cap) and
        the caller splits lines after decoding."""
    @property
    def body(self) -> bytes:
        """The page's bytes (the whole file, when `whole`)."""
    @property
    def first(self) -> int:
        """1-based number of the first line in `body` (unless `whole`)."""
    @property
    def lines(self) -> int:
        """Lines in `body` (unless `whole`)."""
    @property
    def total(self) -> int | None:
        """Lines in the file, when the read reached its end."""
    @property
    def scanned(self) -> int:
        """Bytes scanned from the start; less than `size` when the page ended first."""
    @property
    def capped(self) -> bool:
        """Whether the byte cap stopped the scan before the end of the file."""

@final
class DirListing:
    """A folder's listing, as `read_page` returns it for a folder."""

    @property
    def resolved(self) -> Path:
        """The folder's resolved path."""
    @property
    def names(self) -> list[str]:
        """The entries' names."""

def read_page(
    confinement: Confinement, path: str, offset: int, max_lines: int, max_bytes: int
) -> FilePage | DirListing:
    """read_file in one call: open `path` once beneath the roots; a folder gives its listing, a
    file the page of `max_lines` lines from line `offset` (1-based), read only as far as needed."""

def read_file_head(confinement: Confinement, path: str, max_bytes: int, note: bool = True) -> tuple[Path, bytes, int]:
    """Read a confined file: `(resolved, head, size)`, at most `max_bytes` of it from the start.
    With `note`, the stale-read guard records a file read whole; without, it does not."""

@final
class WriteResult:
    """What `write_file_text` or `write_file_bytes` did."""

    @property
    def resolved(self) -> Path:
        """The path as the kernel resolved it."""
    @property
    def created(self) -> bool:
        """Whether the file is new."""
    @property
    def bytes_written(self) -> int:
        """Bytes written by this call."""
    @property
    def size(self) -> int:
        """The file's size after the write."""

@final
class EditResult:
    """What `edit_file` did."""

    @property
    def resolved(self) -> Path:
        """The path as the kernel resolved it."""
    @property
    def replacements(self) -> int:
        """Replacements made."""
    @property
    def lines(self) -> list[int]:
        """1-based line of each replacement (the first few)."""
    @property
    def eol_adapted(self) -> bool:
        """The strings' line endings were changed to the file's (CRLF)."""

@final
class PatchedFile:
    """One file a patch changed: its path as written, `add`/`update`/`delete`/`move`, and where
    each hunk landed."""

    @property
    def path(self) -> str:
        """The file as the patch names it."""
    @property
    def action(self) -> str:
        """`add`, `update`, `delete` or `move`."""
    @property
    def hunks(self) -> list[tuple[int, str]]:
        """`(line, match)` per hunk: the 1-based line it starts at in the original, and how
        exactly its context matched (the seek tier)."""

@final
class PatchResult:
    """What a patch did, paths as written in it."""

    @property
    def added(self) -> list[str]:
        """Files the patch added."""
    @property
    def modified(self) -> list[str]:
        """Files the patch updated in place."""
    @property
    def moved(self) -> list[tuple[str, str]]:
        """`(from, to)` per move."""
    @property
    def deleted(self) -> list[str]:
        """Files the patch deleted."""
    @property
    def files(self) -> list[PatchedFile]:
        """Each file changed, in patch order."""
    @property
    def summary(self) -> str:
        """Codex's success text."""

def write_file_text(
    confinement: Confinement,
    path: str,
    content: str,
    mode: str,
    max_bytes: int,
    keep_style: bool = True,
    write_read_only: bool = False,
) -> WriteResult:
    """Write `content` to a confined path atomically. `mode`: create | overwrite | append. With
    `keep_style`, an existing file keeps its encoding and all-CRLF endings."""

def write_file_bytes(
    confinement: Confinement,
    path: str,
    content: bytes,
    mode: str,
    max_bytes: int,
    write_read_only: bool = False,
) -> WriteResult:
    """Write `content` to a confined path atomically, byte for byte. `mode`: create | overwrite |
    append."""

def edit_file(
    confinement: Confinement,
    path: str,
    old_string: str,
    new_string: str,
    replace_all: bool,
    max_bytes: int,
    write_read_only: bool = False,
) -> EditResult:
    """Exact-string edit of a confined file, written atomically."""

def apply_patch(confinement: Confinement, patch: str, max_bytes: int, write_read_only: bool = False) -> PatchResult:
    """Apply a Codex-style patch inside the confinement, all files or none."""

def apply_v4a(
    confinement: Confinement,
    operations: Sequence[PatchOperation],
    max_bytes: int,
    write_read_only: bool = False,
) -> PatchResult:
    """Apply OpenAI `apply_patch` operations (V4A diffs) inside the confinement, all or none, by
    V4A's rules; a malformed operation raises `ToolArgumentError` before any file is read."""

def apply_update_to_text(patch: str, content: str) -> str:
    """In memory: apply the single `*** Update File:` section of `patch` to `content`."""

def edit_bytes(content: bytes, old_string: str, new_string: str, replace_all: bool) -> tuple[bytes, int, list[int]]:
    """In memory: the edit on bytes; `(new_bytes, replacements, lines)`."""

@final
class ToolSearchIndex:
    """One catalogue's search index (BM25F over names, namespaces, descriptions, parameters)."""

    def __new__(cls, documents: Sequence[tuple[str, str, str, Sequence[tuple[str, str]]]]) -> ToolSearchIndex: ...
    def __len__(self) -> int: ...
    def search(self, query: str, limit: int, allowed: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """The best `limit` documents for `query` (BM25F) among `allowed`, as (number, score)."""
    def search_regex(self, pattern: str, limit: int, allowed: Sequence[int] | None = None) -> list[int]:
        """Documents any of whose texts match `pattern`, in catalogue order, among `allowed`."""

# ---- checkpoints (rust/binding/src/checkpoints.rs) ------------------------------------------------

@final
class Checkpoints:
    """The checkpoints of one confinement's workspace, kept in a folder outside it."""

    def __new__(
        cls,
        confinement: Confinement,
        state_dir: str | PathLike[str],
        max_checkpoints: int = 100,
        max_store_bytes: int = ...,
        max_file_bytes: int = ...,
        max_paths: int = 200000,
    ) -> Checkpoints: ...
    def take(self, label: str = ...) -> dict[str, Any]:
        """Take a checkpoint of the workspace now: `{id, label, taken_ns, files, uncovered,
        added_bytes}`."""
    def list(self) -> list[dict[str, Any]]:
        """Every checkpoint held, oldest first (`added_bytes` is 0)."""
    def rewind(self, id: int) -> dict[str, Any]:
        """Put the workspace back as it was at checkpoint `id`, all or nothing: `{restored,
        removed, unrestorable: [(path, why)], undo}` (`undo`: the checkpoint taken just before)."""
    @property
    def store_bytes(self) -> int:
        """Bytes the store holds."""
