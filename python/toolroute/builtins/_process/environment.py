"""The environment a model-run command gets: an allowlist of the host's variables, pager-free.

The default is an allowlist, not a denylist: a command sees the variables that describe the
machine and the user's locale and toolchains (`DEFAULT_ENV_ALLOWLIST`), never the host's API keys,
tokens or passwords unless a name is listed on purpose. Guessing which names are secret
(`*_KEY`, `*_TOKEN`...) misses `DATABASE_URL=postgres://user:pw@...` and the like.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence

# As Codex does: nothing may wait on a pager or emit colour codes into captured output.
NON_INTERACTIVE: Mapping[str, str] = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GH_PAGER": "cat",
    "NO_COLOR": "1",
    "TERM": "dumb",
}
# Variables that would undo the above.
REMOVED: tuple[str, ...] = ("COLORTERM", "FORCE_COLOR", "CLICOLOR_FORCE")

# Passed when the context names no allowlist. Shell-style patterns are allowed (`LC_*`).
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "HOSTNAME",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "COLUMNS",
    "LINES",
    "XDG_*",
    # toolchains and virtual environments the workspace may rely on
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "JAVA_HOME",
    "GOPATH",
    "GOROOT",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "PYENV_ROOT",
    "NVM_DIR",
)
INHERIT_ALL = "*"  # an allowlist of just this pattern passes the whole host environment


@functools.lru_cache(maxsize=32)
def _matcher(allowlist: tuple[str, ...]) -> Callable[[str], bool]:
    """One compiled test for a whole allowlist (exact names and shell patterns)."""
    exact = frozenset(entry for entry in allowlist if not any(c in entry for c in "*?["))
    patterns = [fnmatch.translate(entry) for entry in allowlist if entry not in exact]
    if not patterns:
        return exact.__contains__
    regex = re.compile("|".join(patterns))
    return lambda name: name in exact or regex.match(name) is not None


def allowed(name: str, allowlist: Sequence[str]) -> bool:
    """Whether `name` matches an entry of the allowlist (exact names or shell-style patterns)."""
    return _matcher(tuple(allowlist))(name)


def command_environment(
    allowlist: Sequence[str] | None,
    source: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allowlisted variables of `source` (default os.environ), then `overrides`, then
    NON_INTERACTIVE. `allowlist=None` means DEFAULT_ENV_ALLOWLIST; `("*",)` passes everything."""
    src = os.environ if source is None else source
    match = _matcher(DEFAULT_ENV_ALLOWLIST if allowlist is None else tuple(allowlist))
    env = {name: value for name, value in src.items() if match(name)}
    for name in REMOVED:
        env.pop(name, None)
    env.update(overrides or {})
    env.update(NON_INTERACTIVE)
    return env
