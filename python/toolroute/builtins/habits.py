"""The parameter names models bring from other coding agents, accepted but never advertised.

A model trained on Claude Code, Codex or Gemini CLI sends the names it learned there (`file_path`,
`workdir`, `run_in_background`, ...). Refusing them costs a retry per call, so the built-ins
translate them here, before validation, into toolroute's own names and units. The schemas a model
is shown stay exactly toolroute's (`additionalProperties: false`); an argument the model names in
both spellings is left alone, so validation reports the duplicate instead of one silently winning.

The one unit question is Bash's `timeout`: milliseconds in Claude Code, seconds in toolroute. It
is read as milliseconds only when the same call carries a key only Claude Code's Bash sends
(`description` or `run_in_background`), which Claude Code's calls practically always do.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Arguments = dict[str, Any]


@dataclass(frozen=True)
class Rename:
    """`habit` is another agent's name for toolroute's `canonical` argument (same meaning and unit)."""

    habit: str
    canonical: str
    origin: str  # which agent's tools use it (documentation and tests)


@dataclass(frozen=True)
class Rewrite:
    """A habit that needs more than a rename: `apply` edits the arguments when `habit` is present."""

    habit: str
    apply: Callable[[Arguments], None]
    origin: str


Habit = Rename | Rewrite

CLAUDE_BASH_ONLY_KEYS = ("description", "run_in_background")
_SHELLS = ("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh")


def _drop_description(args: Arguments) -> None:
    # Claude Code's and Gemini's Bash take a human-readable summary of the command; it changes nothing.
    if isinstance(args.get("description"), str):
        del args["description"]


def _run_in_background(args: Arguments) -> None:
    value = args.get("run_in_background")
    if not isinstance(value, bool) or args.get("action", "exec") != "exec":
        return  # anything else is left for validation to refuse
    del args["run_in_background"]
    if value:
        args["action"] = "start"


def _command_argv(args: Arguments) -> None:
    # Codex's shell tool sends argv, usually ["bash", "-lc", "<script>"].
    argv = args.get("command")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return
    if len(argv) == 3 and argv[0] in _SHELLS and argv[1] in ("-c", "-lc", "-cl"):
        args["command"] = argv[2]
    else:
        args["command"] = shlex.join(argv)


def _dash_n(args: Arguments) -> None:
    # Claude Code's Grep `-n` asks for line numbers, which content output always has.
    if isinstance(args.get("-n"), bool):
        del args["-n"]


def _claude_timeout(args: Arguments) -> None:
    """Claude Code's Bash `timeout` is in milliseconds (see the module docstring for the rule)."""
    if not any(key in args for key in CLAUDE_BASH_ONLY_KEYS) or "timeout_ms" in args or "timeoutMs" in args:
        return
    timeout = args.get("timeout")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        args["timeout_ms"] = args.pop("timeout")


_PATH = ("file_path", "path", "Claude Code Read/Write/Edit, Codex, Gemini CLI")

# Tool -> habits, applied in order. Renames run last, after rewrites have read the raw call.
HABITS: Mapping[str, tuple[Habit, ...]] = {
    "read_file": (Rename(*_PATH), Rename("absolute_path", "path", "Gemini CLI read_file")),
    "write_file": (Rename(*_PATH),),
    "edit": (Rename(*_PATH),),
    "bash": (
        Rewrite("timeout", _claude_timeout, "Claude Code Bash (milliseconds)"),
        Rewrite("description", _drop_description, "Claude Code Bash, Gemini CLI run_shell_command"),
        Rewrite("run_in_background", _run_in_background, "Claude Code Bash"),
        Rewrite("command", _command_argv, "Codex shell (argv list)"),
        Rename("workdir", "cwd", "Codex shell"),
        Rename("dir_path", "cwd", "Gemini CLI run_shell_command"),
        Rename("directory", "cwd", "Gemini CLI run_shell_command (older)"),
    ),
    "grep": (
        Rewrite("-n", _dash_n, "Claude Code Grep"),
        Rename("dir_path", "path", "Gemini CLI search_file_content"),
        Rename("include_pattern", "glob", "Gemini CLI search_file_content"),
    ),
    "glob": (Rename("dir_path", "path", "Gemini CLI glob"),),
}


def translate(tool: str, data: Any) -> Any:
    """The call's arguments in toolroute's names and units; anything else is returned unchanged."""
    habits = HABITS.get(tool)
    if not habits or not isinstance(data, Mapping) or not any(h.habit in data for h in habits):
        return data
    args = dict(data)
    for habit in habits:
        if habit.habit not in args:
            continue
        if isinstance(habit, Rewrite):
            habit.apply(args)
        elif habit.canonical not in args:
            args[habit.canonical] = args.pop(habit.habit)
    return args


# Request model -> the built-in it belongs to, told by each `BuiltinTool` as it is made.
_TOOL_OF: dict[type, str] = {}


def belongs_to(model: type, tool: str) -> None:
    """Record that `model` is the request model of the built-in `tool` (its habits apply)."""
    _TOOL_OF[model] = tool


def translate_for_model(model: type, data: Any) -> Any:
    """`translate` for a built-in's request model (the hook in `BuiltinRequest`)."""
    tool = _TOOL_OF.get(model)
    return data if tool is None else translate(tool, data)
