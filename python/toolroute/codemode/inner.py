"""How a program's inner call is run: through the router by default, or through whoever ran the
code tool's own call (the agent layer's `ToolCallRunner`, with its approval policy, retries,
telemetry and trace sinks), which says so by setting `INNER_CALLS` while the code tool runs."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InnerReply:
    """One inner call's outcome as the program receives it."""

    ok: bool
    text: str  # the result text, or the error's message
    kind: str | None = None  # the error's kind (an exception class name, or DENIED...)


# (exposed name, arguments, callable) -> reply. `callable` False: the name is outside the program's
# catalogue, and the host runs nothing; it records the refusal its own way (a sink, an audit line)
# and answers with it.
InnerCaller = Callable[[str, Mapping[str, Any], bool], InnerReply]

INNER_CALLS: contextvars.ContextVar[InnerCaller | None] = contextvars.ContextVar(
    "toolroute_code_inner_calls", default=None
)


@contextlib.contextmanager
def inner_calls_through(caller: InnerCaller) -> Iterator[None]:
    """While the block runs, a code tool it runs sends its program's calls to `caller`."""
    reset = INNER_CALLS.set(caller)
    try:
        yield
    finally:
        INNER_CALLS.reset(reset)


def not_callable(name: str) -> str:
    """The refusal of a name outside a program's catalogue (one wording for every host)."""
    return f"no tool {name!r} is callable from this program"
