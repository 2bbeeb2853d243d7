"""Anthropic's native coding tools on toolroute's built-ins: `bash_20250124` (a persistent shell
session) and `text_editor_20250728` (`str_replace_based_edit_tool`), in the native tools' own
vocabulary (Anthropic's documented outputs and its reference implementation's wording,
`anthropic-quickstarts`' `computer_use_demo/tools`), each command a call of the allowlist's own
built-in (`bash`, `read_file`, `write_file`, `edit`) through `ExposedTools`, so confinement, the
sandbox, caps, approval, trace and audit are the built-ins'. Deliberate differences are listed
in docs/native.md (tabs are kept, not expanded; views carry the read_file cap).

Each command is written once, as a generator yielding its tool calls (`_twins`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import anyio

from toolroute._core import read_file_head
from toolroute._twins import Body, Step
from toolroute.adapters._native import read_new_output
from toolroute.allowlist import CallOutcome, ExposedTools
from toolroute.builtins.media import is_media_read
from toolroute.context import BuiltInToolContext

SNIPPET_LINES = 4  # lines shown around an edit, as the reference's editor shows them


class NativeError(Exception):
    """A native tool's error text, reported to the model as the tool's own error (`is_error`)."""


def _call(tools: ExposedTools, name: str, arguments: Mapping[str, Any]) -> Body[CallOutcome]:
    outcome: CallOutcome = yield Step(tools.execute, tools.aexecute, (name, dict(arguments)))
    return outcome


def _numbered(text: str, first: int) -> str:
    return "\n".join(f"{first + i:6}\t{line}" for i, line in enumerate(text.split("\n")))


class TextEditor:
    """`str_replace_based_edit_tool` (text_editor_20250728): view, create, str_replace, insert."""

    COMMANDS = ("view", "create", "str_replace", "insert")

    def __init__(self, tools: ExposedTools, max_characters: int | None = None) -> None:
        self.tools = tools
        self.max_characters = max_characters

    def run(self, command: Mapping[str, Any]) -> Body[str | CallOutcome]:
        """The command's output text (a view of an image or a PDF: read_file's outcome, with its
        blocks); raises NativeError with the native tool's error text."""
        name = command.get("command")
        path = command.get("path")
        if not isinstance(path, str) or not path:
            raise NativeError("Parameter `path` is required")
        if not path.startswith("/"):
            raise NativeError(
                f"The path {path} is not an absolute path, it should start with `/`. Maybe you meant /{path}?"
            )
        if name == "view":
            return (yield from self._view(path, command.get("view_range")))
        if name == "create":
            text = command.get("file_text")
            if text is None:
                raise NativeError("Parameter `file_text` is required for command: create")
            return (yield from self._create(path, str(text)))
        if name == "str_replace":
            old = command.get("old_str")
            if old is None:
                raise NativeError("Parameter `old_str` is required for command: str_replace")
            return (yield from self._str_replace(path, str(old), str(command.get("new_str") or "")))
        if name == "insert":
            line = command.get("insert_line")
            # Some models send the text as `new_str` (the 2025-01 version's name): both are taken.
            text = command.get("insert_text", command.get("new_str"))
            if line is None:
                raise NativeError("Parameter `insert_line` is required for command: insert")
            if text is None:
                raise NativeError("Parameter `insert_text` is required for command: insert")
            return (yield from self._insert(path, int(line), str(text)))
        allowed = ", ".join(self.COMMANDS)
        raise NativeError(
            f"Unrecognized command {name}. The allowed commands for the str_replace_based_edit_tool tool are: {allowed}"
        )

    # ---- commands -----------------------------------------------------------------------

    def _view(self, path: str, view_range: Any) -> Body[str | CallOutcome]:
        listing = _folder_listing(self.tools.router.builtin_context("str_replace_based_edit_tool"), path)
        if listing is not None:
            if view_range:
                raise NativeError("The `view_range` parameter is not allowed when `path` points to a directory.")
            header = f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden items:"
            return f"{header}\n{listing}\n"
        arguments: dict[str, Any] = {"path": path}
        first = 1
        if view_range:
            pair = isinstance(view_range, list | tuple) and len(view_range) == 2
            if not pair or not all(isinstance(i, int) for i in view_range):
                raise NativeError("Invalid `view_range`. It should be a list of two integers.")
            total = _line_count(self._text(path))
            first, last = view_range
            if first < 1 or first > total:
                raise NativeError(
                    f"Invalid `view_range`: {list(view_range)}. Its first element `{first}` should be within the range "
                    f"of lines of the file: {[1, total]}"
                )
            if last > total:
                raise NativeError(
                    f"Invalid `view_range`: {list(view_range)}. Its second element `{last}` should be smaller than the "
                    f"number of lines in the file: `{total}`"
                )
            if last != -1 and last < first:
                raise NativeError(
                    f"Invalid `view_range`: {list(view_range)}. Its second element `{last}` should be larger or equal "
                    f"than its first `{first}`"
                )
            arguments["offset"] = first
            if last != -1:
                arguments["end_line"] = last
        if self.max_characters is not None:
            arguments["max_chars"] = self.max_characters
        outcome = yield from _call(self.tools, "read_file", arguments)
        if outcome.is_error:
            raise NativeError(_missing(path, outcome.text))
        if is_media_read(outcome.trace):
            return outcome  # an image or a PDF: read_file's own blocks and text, as Claude's Read gives them
        # read_file numbers its lines as `cat -n` does (six columns, a tab); its note that
        # more lines follow is dropped when they were not asked for (the range was shown whole).
        text = outcome.text
        shown = outcome.trace.get("end_line") if isinstance(outcome.trace, dict) else None
        if "end_line" in arguments and shown == arguments["end_line"]:
            text = "\n".join(line for line in text.split("\n") if not line.startswith("[… showing lines"))
        return f"Here's the result of running `cat -n` on {path}:\n{text}\n"

    def _create(self, path: str, text: str) -> Body[str]:
        outcome = yield from _call(self.tools, "write_file", {"path": path, "content": text, "mode": "create"})
        if outcome.is_error:
            if "exists" in outcome.text:
                raise NativeError(f"File already exists at: {path}. Cannot overwrite files using command `create`.")
            raise NativeError(outcome.text)
        return f"File created successfully at: {path}"

    def _str_replace(self, path: str, old: str, new: str) -> Body[str]:
        outcome = yield from _call(self.tools, "edit", {"path": path, "old_string": old, "new_string": new})
        if outcome.is_error:
            raise NativeError(self._why_not_replaced(path, old, outcome.text))
        line = int(outcome.trace["lines"][0]) if isinstance(outcome.trace, dict) and outcome.trace.get("lines") else 1
        first = max(1, line - SNIPPET_LINES)
        last = line + SNIPPET_LINES + new.count("\n")
        snippet = yield from _call(self.tools, "read_file", {"path": path, "offset": first, "end_line": last})
        return (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
            f"{snippet.text}\nReview the changes and make sure they are as expected. Edit the file again if necessary."
        )

    def _why_not_replaced(self, path: str, old: str, error: str) -> str:
        """The native wording for a replacement that did not happen (from the file as it is)."""
        try:
            text = self._text(path)
        except NativeError:
            return _missing(path, error)
        count = text.count(old)
        if count == 0:
            return f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
        if count > 1:
            lines = [n + 1 for n, line in enumerate(text.split("\n")) if old in line]
            return (
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines {lines}. "
                "Please ensure it is unique"
            )
        return error

    def _insert(self, path: str, at: int, text: str) -> Body[str]:
        lines = self._text(path).split("\n")
        if at < 0 or at > len(lines):
            raise NativeError(
                f"Invalid `insert_line` parameter: {at}. It should be within the range of lines of the file: "
                f"{[0, len(lines)]}"
            )
        added = text.split("\n")
        updated = "\n".join([*lines[:at], *added, *lines[at:]])
        outcome = yield from _call(self.tools, "write_file", {"path": path, "content": updated, "mode": "overwrite"})
        if outcome.is_error:
            raise NativeError(outcome.text)
        snippet = [*lines[max(0, at - SNIPPET_LINES) : at], *added, *lines[at : at + SNIPPET_LINES]]
        first = max(1, at - SNIPPET_LINES + 1)
        shown = _numbered("\n".join(snippet), first)
        return (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n"
            f"{shown}\nReview the changes and make sure they are as expected (correct indentation, no duplicate "
            "lines, etc). Edit the file again if necessary."
        )

    def _text(self, path: str) -> str:
        """The file's whole text, read confined (raises the native error for a missing file)."""
        ctx = self.tools.router.builtin_context("str_replace_based_edit_tool")
        try:
            _, data, _ = read_file_head(ctx.confinement, path, ctx.limits.max_file_bytes)
        except Exception as exc:
            raise NativeError(_missing(path, str(exc))) from None
        return data.decode("utf-8", "replace")


def _line_count(text: str) -> int:
    return len(text.split("\n"))


def _missing(path: str, error: str) -> str:
    lowered = error.lower()
    if "no such file" in lowered or "not found" in lowered or "does not exist" in lowered:
        return f"The path {path} does not exist. Please provide a valid path."
    return error


def _folder_listing(ctx: BuiltInToolContext, path: str) -> str | None:
    """`find PATH -maxdepth 2 -not -path '*/.*'`, confined; None when `path` is no folder."""
    from toolroute._core import DirListing, read_page

    def names(folder: str) -> list[str] | None:
        try:
            got = read_page(ctx.confinement, folder, 1, 1, 1)
        except Exception:
            return None
        return sorted(got.names) if isinstance(got, DirListing) else None

    top = names(path)
    if top is None:
        return None
    root = path.rstrip("/") or "/"
    lines = [root]
    for name in top:
        if name.startswith("."):
            continue
        child = f"{root.rstrip('/')}/{name.rstrip('/')}"
        lines.append(child)
        if name.endswith("/"):
            lines += [f"{child}/{n.rstrip('/')}" for n in names(child) or () if not n.startswith(".")]
    return "\n".join(lines)


class BashSession:
    """`bash_20250124`: one shell for the conversation, on the allowlist's `bash` background
    processes, so `cd` and exported variables carry from one command to the next (each
    `bash` call of the function tool is a fresh shell). A command's end is known by a sentinel
    it prints after itself; `restart` ends the shell and starts another."""

    TIMEOUT = 120.0  # as the reference's session: a command that has not returned by then
    POLL = 0.02
    STDERR_GRACE = 1.0  # how long stderr's end mark is awaited once stdout's has come

    def __init__(self, tools: ExposedTools, timeout: float = TIMEOUT) -> None:
        self.tools = tools
        self.timeout = timeout
        self.process: str | None = None
        self._offsets = {"stdout": 0, "stderr": 0}

    def run(self, command: Mapping[str, Any], via: ExposedTools | None = None) -> Body[str]:
        """One command; `via` is the door it goes through (an approved call's, say)."""
        tools = via or self.tools
        if command.get("restart"):
            yield from self.stop(tools)
            yield from self._start(tools)
            return "tool has been restarted."
        text = command.get("command")
        if not isinstance(text, str) or not text.strip():
            raise NativeError("no command provided.")
        if self.process is None:
            yield from self._start(tools)
        return (yield from self._command(text, tools))

    def stop(self, via: ExposedTools | None = None) -> Body[None]:
        if self.process is not None:
            yield from _call(via or self.tools, "bash", {"action": "stop", "process_id": self.process})
            self.process = None

    def _start(self, tools: ExposedTools) -> Body[None]:
        outcome = yield from _call(tools, "bash", {"action": "start", "command": "exec bash --noprofile --norc -s"})
        if outcome.is_error or not isinstance(outcome.trace, dict):
            raise NativeError(outcome.text)
        self.process = str(outcome.trace["processId"])
        self._offsets = {"stdout": 0, "stderr": 0}

    def _command(self, text: str, tools: ExposedTools) -> Body[str]:
        process = self.process
        assert process is not None  # started by run()
        sentinel = f"__toolroute_done_{uuid.uuid4().hex}__"
        # The end is marked on both streams: they are read apart, so stdout's mark alone can
        # arrive before the command's last stderr does.
        mark = f"{text}\necho '{sentinel}'; echo '{sentinel}' >&2\n"
        wrote = yield from _call(tools, "bash", {"action": "write", "process_id": process, "input": mark})
        if wrote.is_error:
            self.process = None  # the shell has gone: the next command starts another
            raise NativeError(f"bash has exited and must be restarted: {wrote.text}")
        out, err = "", ""
        deadline = time.monotonic() + self.timeout
        returned: float | None = None  # when stdout's mark came
        while True:
            new = yield from read_new_output(tools, process, self._offsets)
            out, err = out + new.stdout, err + new.stderr
            if returned is None and sentinel in out:
                returned = time.monotonic()
            # A command that closed the shell's stderr leaves no mark there: its grace ends the wait.
            if returned is not None and (sentinel in err or time.monotonic() > returned + self.STDERR_GRACE):
                break
            if not new.running:
                self.process = None
                why = new.error or f"bash has exited with code {new.exit_code}"
                raise NativeError(f"{why} and must be restarted")
            if returned is None and time.monotonic() > deadline:
                yield from self.stop(tools)  # the next command gets a fresh shell
                raise NativeError(f"timed out: bash has not returned in {self.timeout:g} seconds and must be restarted")
            yield Step(time.sleep, anyio.sleep, (self.POLL,))
        out, err = out[: out.index(sentinel)], err.partition(sentinel)[0]
        out, err = out.removesuffix("\n"), err.removesuffix("\n")
        return out if not err else f"{out}\n{err}" if out else err


__all__ = ["BashSession", "NativeError", "TextEditor"]
