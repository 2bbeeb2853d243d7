"""Approving shell commands by what they are, not by how they start.

A regex such as `^(ls|pwd)\\b` approves `ls; rm -rf ~` too. `ShellCommands` parses the script with
tree-sitter-bash (the parser Codex uses for its safe-command check) and approves only a script it
can prove is nothing but allowed simple commands joined by `;`, `&&`, `||`, `|` or newlines, whose
every word is literal text. Anything it cannot prove safe is not approved: a parse error, `$(...)`
or backticks, `$VAR` / `${...}`, `<(...)`, any redirection or here-doc, subshells and groups, `&`,
environment assignments (`PAGER=x git log`), control flow, functions, and unquoted glob or brace
characters (a file named `--output=x` would turn `git diff *` into a write). "Not approved" means
the rule does not match, so the next rule (usually "ask") decides.

Needs the `shell` extra: `pip install 'toolroute[shell]'`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from toolroute.agent.policy import Rule, Verdict

# Nodes that are only structure around simple commands.
_LIST_NODES = frozenset({"program", "list", "pipeline", "comment"})
# Tokens allowed between commands; `&` (background), `|&`, `;;` and everything else are not.
_SEPARATORS = frozenset({";", "&&", "||", "|", "\n"})
# Characters that make an unquoted word expand (globs, braces) or need unescaping.
_EXPANDING = frozenset("*?[]{}\\")

# Options of the usual read-only commands that write files or run programs.
DEFAULT_FORBIDDEN_OPTIONS: tuple[str, ...] = (
    "--output",  # git diff/log --output=FILE writes it
    "--ext-diff",  # runs a configured external diff program
    "--textconv",  # runs configured conversion filters
    "--exec",
    "--upload-pack",
    "--receive-pack",
    "--open-files-in-pager",
)


class UnprovableShell(Exception):
    """The script has a construct that cannot be proven safe (the message says which)."""


@cache
def _parser_language() -> Any:
    try:
        tree_sitter = importlib.import_module("tree_sitter")
        bash = importlib.import_module("tree_sitter_bash")
    except ImportError as exc:
        raise ImportError("ShellCommands needs tree-sitter-bash: pip install 'toolroute[shell]'") from exc
    return tree_sitter, tree_sitter.Language(bash.language())


def _parse(script: str) -> Any:
    tree_sitter, language = _parser_language()
    return tree_sitter.Parser(language).parse(script.encode("utf-8")).root_node


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8")


def _word(node: Any) -> str:
    """The literal value of one word of a command; raises if it could expand to anything else."""
    kind = node.type
    if kind in ("word", "number"):
        text = _text(node)
        if _EXPANDING & set(text):
            raise UnprovableShell(f"unquoted glob, brace or escape in {text!r}")
        return text
    if kind == "raw_string":  # '...': taken literally by bash
        return _text(node)[1:-1]
    if kind == "string":  # "...": literal only when made of plain text
        parts = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type != "string_content" or "\\" in _text(child):
                raise UnprovableShell(f"expansion or escape inside {_text(node)!r}")
            parts.append(_text(child))
        return "".join(parts)
    if kind == "concatenation":
        return "".join(_word(child) for child in node.children)
    raise UnprovableShell(f"{kind.replace('_', ' ')} in {_text(node)!r}")


def _argv(command: Any) -> list[str]:
    argv = []
    for child in command.children:
        if child.type == "command_name":
            (name,) = child.children
            argv.append(_word(name))
        elif child.is_named:
            argv.append(_word(child))
        else:
            raise UnprovableShell(f"{child.type!r} in a command")
    return argv


def _commands(node: Any) -> Iterator[list[str]]:
    for child in node.children:
        if child.type == "command":
            yield _argv(child)
        elif child.type in _LIST_NODES:
            yield from _commands(child)
        elif child.is_named:
            raise UnprovableShell(f"{child.type.replace('_', ' ')}: {_text(child)[:60]!r}")
        elif child.type not in _SEPARATORS:
            raise UnprovableShell(f"operator {child.type!r}")


def simple_commands(script: str) -> list[list[str]]:
    """The argv of every simple command in `script`, in order; raises `UnprovableShell` unless the
    script is only literal simple commands joined by `;`, `&&`, `||`, `|` or newlines."""
    if "\\\n" in script or "\r" in script or "\0" in script:
        # A line continuation joins words (`l\<newline>s` is `ls`), which the tree keeps apart;
        # CR and NUL are read differently by bash and the parser.
        raise UnprovableShell("line continuation, carriage return or NUL in the script")
    root = _parse(script)
    if root.has_error:
        raise UnprovableShell("the script does not parse as bash")
    commands = list(_commands(root))
    if not commands:
        raise UnprovableShell("no command")
    return commands


@dataclass(frozen=True)
class ShellCommands:
    """An argument condition for `Rule`: true when every command of the script is allowed.

    `allowed` entries are word prefixes: "ls" allows `ls -la src`; "git status" allows `git status
    --short` but not `git -c core.pager=sh status`. Arguments after the prefix must not be one of
    `forbidden_options` (nor `OPTION=...`).
    """

    allowed: tuple[str, ...]
    forbidden_options: tuple[str, ...] = DEFAULT_FORBIDDEN_OPTIONS
    _prefixes: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed", tuple(self.allowed))
        object.__setattr__(self, "_prefixes", tuple(tuple(a.split()) for a in self.allowed))
        if not all(self._prefixes):
            raise ValueError("an allowed command must have at least one word")

    def refusal(self, script: str) -> str | None:
        """None when the script is approved, else why not."""
        try:
            commands = simple_commands(script)
        except UnprovableShell as exc:
            return str(exc)
        for argv in commands:
            prefix = next((p for p in self._prefixes if tuple(argv[: len(p)]) == p), None)
            if prefix is None:
                return f"{' '.join(argv[:2])!r} is not an allowed command"
            for arg in argv[len(prefix) :]:
                if arg.split("=", 1)[0] in self.forbidden_options:
                    return f"option {arg!r} is not allowed"
        return None

    def __call__(self, value: Any) -> bool:
        return isinstance(value, str) and self.refusal(value) is None


def allow_shell_commands(
    allowed: Iterable[str], *, tools: str | tuple[str, ...] = "bash", argument: str = "command", reason: str = ""
) -> Rule:
    """A `Rule` approving a shell tool's call when its script is only `allowed` commands."""
    return Rule(tools, Verdict.ALLOW, reason, arguments={argument: ShellCommands(tuple(allowed))})
