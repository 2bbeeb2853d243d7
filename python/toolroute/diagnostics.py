"""Diagnostics after an edit (docs/safe-editing.md, "Diagnostics after an edit"): which checkers a
context runs on the files its file tools change, and how their findings are told.

The checkers run in `builtins/_diagnostics.py`, inside the context's sandbox, with a time limit,
at most once per file per batch of the agent layer (a batch starts a `diagnostics_batch()`).
"""

from __future__ import annotations

import contextvars
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# How a checker's output is read: "exit-code", any failure is one error with the checker's
# output as its message; "ruff-json", ruff's `--output-format=json` (a syntax error is an
# error, a rule's finding a warning).
CheckerOutput = Literal["exit-code", "ruff-json"]


# (No `{path}` in it: that is the placeholder of `Checker.command`.)
_COMPILE = """import sys
name = sys.argv[1]
try:
    compile(open(name, "rb").read(), name, "exec", dont_inherit=True)
except SyntaxError as e:
    print(f"{name}:{e.lineno}:{e.offset}: {e.msg}")
    sys.exit(1)
"""


@dataclass(frozen=True)
class Checker:
    """A command run on each changed file whose name ends with one of `suffixes`.

    `command` is a shell command; `{path}` in it is the file's path relative to the workspace
    (quoted), else the path is appended. It runs in the workspace, in the context's sandbox.
    """

    command: str
    suffixes: tuple[str, ...]
    output: CheckerOutput = "exit-code"
    name: str = ""

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise ValueError("Checker.command must not be empty")
        if not self.suffixes or not all(s.startswith(".") for s in self.suffixes):
            raise ValueError(f"Checker.suffixes must be file suffixes such as '.py', got {self.suffixes!r}")
        if self.output not in ("exit-code", "ruff-json"):
            raise ValueError(f"Checker.output must be exit-code or ruff-json, got {self.output!r}")

    @property
    def label(self) -> str:
        return self.name or self.command.split()[0]

    def applies_to(self, path: Path) -> bool:
        return path.name.endswith(self.suffixes)

    def command_for(self, relative: str) -> str:
        quoted = shlex.quote(relative)
        return self.command.replace("{path}", quoted) if "{path}" in self.command else f"{self.command} {quoted}"

    @classmethod
    def python_syntax(cls, executable: str = sys.executable) -> Checker:
        """Python's own compiler on `.py` files (nothing written: no `__pycache__`): a syntax
        error is an error, told as `path:line:column: message`."""
        return cls(f"{shlex.quote(executable)} -I -c {shlex.quote(_COMPILE)}", (".py",), name="python")

    @classmethod
    def ruff(cls, executable: str = "ruff") -> Checker:
        """`ruff check` on `.py` files: syntax errors are errors, rule findings warnings."""
        command = f"{shlex.quote(executable)} check --output-format=json --no-cache --exit-zero"
        return cls(command, (".py", ".pyi"), output="ruff-json", name="ruff")


@dataclass(frozen=True)
class Diagnostics:
    """A context's diagnostics: its checkers, their time limit (seconds per run), whether
    warnings are told too, and whether an edit that leaves a file with errors is refused (the
    file put back as it was, the error told)."""

    checkers: tuple[Checker, ...]
    timeout: float = 10.0
    warnings: bool = False
    refuse_errors: bool = False
    max_message_chars: int = 2000  # one finding's message, cut

    def __post_init__(self) -> None:
        if not self.checkers:
            raise ValueError("Diagnostics needs at least one Checker")
        if not 0 < self.timeout <= 600:
            raise ValueError(f"Diagnostics.timeout must be in (0, 600] seconds, got {self.timeout!r}")


@dataclass(frozen=True)
class Finding:
    """One diagnostic: the file (as shown to the model), the checker, error or warning, what it said."""

    path: str
    checker: str
    severity: Literal["error", "warning"]
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "checker": self.checker, "severity": self.severity, "message": self.message}


# The files already checked in this batch (None outside a batch: every call checks its files).
_checked: contextvars.ContextVar[set[tuple[str, str]] | None] = contextvars.ContextVar(
    "toolroute_diagnostics_checked", default=None
)


@contextmanager
def diagnostics_batch() -> Iterator[None]:
    """One batch of the agent layer: a file is checked at most once within it."""
    token = _checked.set(set())
    try:
        yield
    finally:
        _checked.reset(token)


def first_check_in_batch(checker: Checker, path: Path) -> bool:
    """Whether `checker` has yet to check `path` in this batch (and mark it checked)."""
    seen = _checked.get()
    if seen is None:
        return True
    key = (checker.command, str(path))
    if key in seen:
        return False
    seen.add(key)
    return True
