"""The environment a model-run command gets: inherited or allowlisted, and pager-free."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

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


def command_environment(allowlist: Sequence[str] | None, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """`source` (default os.environ) whole, or only the allowlisted names, plus NON_INTERACTIVE."""
    src = os.environ if source is None else source
    env = dict(src) if allowlist is None else {name: src[name] for name in allowlist if name in src}
    for name in REMOVED:
        env.pop(name, None)
    env.update(NON_INTERACTIVE)
    return env
