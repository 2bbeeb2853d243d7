"""Anthropic's memory tool (`memory_20250818`) on toolroute's confined file layer.

The anthropic SDK's reference, `BetaLocalFilesystemMemoryTool`, keeps `/memories` in a local
folder; this one answers every command with the reference's own wording and leaves the same
files behind (tests/adapters/test_native_anthropic.py runs a scripted session on both), but each path
is opened beneath the folder by descriptor (toolroute's `Confinement`: a `..`, an absolute path
or a symlink planted in the folder cannot lead out), files are written atomically (staged,
renamed, fsynced), and served mode can give each user a folder of their own. It is an
`BetaAbstractMemoryTool`, so it also plugs into the SDK's own tool runner.

Memory is the model's own notes, not a workspace file: its commands do not go through the
allowlist's built-ins, but `AnthropicTools` holds them under `needs_approval=` as it holds bash
and the editor (`True`: every command that writes; a rule is asked with the name `memory`).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError

from toolroute._core import DirListing, read_file_head, read_page, write_file_text
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolError as RouterError

PREFIX = "/memories"
LINE_NUMBER_WIDTH = 6  # the reference's: len(str(999999))
MAX_LINES = 999_999
_FILE_MODE, _DIR_MODE = 0o600, 0o700


def _size(n: int) -> str:
    """The reference's sizes: 0B, 512B, 4.0K, 1.5M."""
    if n == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((n.bit_length() - 1) // 10, len(units) - 1)
    value = n / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


class MemoryTool(BetaAbstractMemoryTool):
    """`/memories` in `root`, confined; the reference's commands, outputs and errors."""

    def __init__(self, root: str | os.PathLike[str], *, max_file_bytes: int = 10 << 20) -> None:
        super().__init__()
        self.root = Path(root)
        self.root.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        self.context = BuiltInToolContext(self.root)
        self.max_file_bytes = max_file_bytes

    # ---- paths ------------------------------------------------------------------------------

    def _relative(self, path: str) -> str:
        if not path.startswith(PREFIX):
            raise ToolError(f"Path must start with /memories, got: {path}")
        return path[len(PREFIX) :].lstrip("/") or "."

    def _resolve(self, path: str) -> Path:
        """The real path `path` names, beneath the folder (opened by descriptor to check)."""
        relative = self._relative(path)
        try:
            return Path(self.context.resolve(relative, write=True))
        except RouterError:
            raise ToolError(f"Path {path} would escape /memories directory") from None

    def _is_root(self, resolved: Path) -> bool:
        return resolved == Path(self.context.resolve(".", write=True))

    def _text(self, path: str) -> str:
        try:
            _, data, _ = read_file_head(self.context.confinement, self._relative(path), self.max_file_bytes)
        except RouterError as exc:
            raise ToolError(str(exc)) from None
        return data.decode("utf-8")

    def _write(self, path: str, text: str, mode: str) -> None:
        confinement, relative = self.context.confinement, self._relative(path)
        write_file_text(confinement, relative, text, mode, self.max_file_bytes, keep_style=False)
        os.chmod(self._resolve(path), _FILE_MODE)  # the notes are the server's user's alone

    # ---- commands -----------------------------------------------------------------------------

    def view(self, command: Any) -> str:
        full = self._resolve(command.path)
        try:
            leaf = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError(f"The path {command.path} does not exist. Please provide a valid path.") from None
        if stat.S_ISDIR(leaf.st_mode):
            header = f"Here're the files and directories up to 2 levels deep in {command.path}, excluding hidden items:"
            lines = [f"{_size(leaf.st_size)}\t{command.path}"]
            lines += [f"{size}\t{command.path}/{name}" for size, name in self._items(command.path, "", 1)]
            return f"{header}\n" + "\n".join(lines)
        if not stat.S_ISREG(leaf.st_mode):
            raise ToolError(f"Unsupported file type for {command.path}")
        lines = self._text(command.path).split("\n")
        if len(lines) > MAX_LINES:
            raise ToolError(f"File {command.path} exceeds maximum line limit of 999,999 lines.")
        first, shown = 1, lines
        view_range = getattr(command, "view_range", None)
        if view_range and len(view_range) == 2:
            start = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            first, shown = start + 1, lines[start:end]
        numbered = [f"{str(i + first).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(shown)]
        return f"Here's the content of {command.path} with line numbers:\n" + "\n".join(numbered)

    def _items(self, path: str, relative: str, depth: int) -> list[tuple[str, str]]:
        """(size, name) of the folder's entries, two levels deep, hidden ones left out."""
        if depth > 2:
            return []
        folder = f"{path.rstrip('/')}/{relative}" if relative else path
        try:
            listing = read_page(self.context.confinement, self._relative(folder), 1, 1, 1)
        except RouterError:
            return []
        if not isinstance(listing, DirListing):
            return []
        items = []
        for entry in sorted(listing.names, key=lambda n: n.rstrip("/")):
            name = entry.rstrip("/")
            if name.startswith("."):
                continue
            child = f"{relative}/{name}" if relative else name
            try:
                info = os.stat(self._resolve(f"{path.rstrip('/')}/{child}"))
            except (OSError, ToolError):
                continue
            if stat.S_ISDIR(info.st_mode):
                items.append((_size(info.st_size), f"{child}/"))
                if depth < 2:
                    items += self._items(path, child, depth + 1)
            elif stat.S_ISREG(info.st_mode):
                items.append((_size(info.st_size), child))
        return items

    def create(self, command: Any) -> str:
        full = self._resolve(command.path)
        if os.path.lexists(full):
            raise ToolError(f"File {command.path} already exists")
        try:
            self._write(command.path, command.file_text, "create")
        except RouterError as exc:
            if "exists" in str(exc):
                raise ToolError(f"File {command.path} already exists") from None
            raise ToolError(str(exc)) from None
        return f"File created successfully at: {command.path}"

    def _existing_file(self, path: str) -> str:
        full = self._resolve(path)
        if not full.exists():
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        if not full.is_file():
            raise ToolError(f"The path {path} is not a file.")
        return self._text(path)

    def str_replace(self, command: Any) -> str:
        content = self._existing_file(command.path)
        count = content.count(command.old_str)
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str}` did not appear verbatim in {command.path}."
            )
        if count > 1:
            lines, start = [], 0
            while (pos := content.find(command.old_str, start)) != -1:
                lines.append(content[:pos].count("\n") + 1)
                start = pos + 1
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{command.old_str}` in lines: "
                f"{', '.join(map(str, lines))}. Please ensure it is unique"
            )
        changed = content[: content.find(command.old_str)].count("\n")
        updated = content.replace(command.old_str, command.new_str)
        self._write(command.path, updated, "overwrite")
        new_lines = updated.split("\n")
        first, last = max(0, changed - 2), min(len(new_lines), changed + 3)
        snippet = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(first + 1, last + 1)]
        return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + (
            "\n".join(snippet)
        )

    def insert(self, command: Any) -> str:
        content = self._existing_file(command.path)
        lines = content.split("\n")
        if lines[-1] == "":
            lines.pop()
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. It should be within the range "
                f"[0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        updated = "\n".join(lines)
        self._write(command.path, updated if updated.endswith("\n") else updated + "\n", "overwrite")
        return f"The file {command.path} has been edited."

    def delete(self, command: Any) -> str:
        full = self._resolve(command.path)
        if self._is_root(full):
            raise ToolError("Cannot delete the /memories directory itself")
        if full.is_symlink() or full.is_file():
            full.unlink()
        elif full.is_dir():
            shutil.rmtree(full)
        else:
            raise ToolError(f"The path {command.path} does not exist")
        return f"Successfully deleted {command.path}"

    def rename(self, command: Any) -> str:
        old, new = self._resolve(command.old_path), self._resolve(command.new_path)
        if self._is_root(old):
            raise ToolError("Cannot rename the /memories directory itself")
        if os.path.lexists(new):
            raise ToolError(f"The destination {command.new_path} already exists")
        new.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        try:
            old.rename(new)
        except FileNotFoundError:
            raise ToolError(f"The path {command.old_path} does not exist") from None
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        for entry in self.root.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        return "All memory cleared"


__all__ = ["MemoryTool"]
