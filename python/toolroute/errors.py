"""toolroute's exceptions. Every message is written for the model as much as for the host."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class ToolError(Exception):
    """Base class of every error toolroute raises on purpose."""


class ToolNotFoundError(ToolError):
    """No tool of that name can be reached by this caller."""

    def __init__(self, name: str, suggestions: Sequence[str] = (), detail: str = "") -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        message = f"tool {name!r} not found"
        if detail:
            message += f" ({detail})"
        if self.suggestions:
            message += "; did you mean " + ", ".join(repr(s) for s in self.suggestions) + "?"
        super().__init__(message)


class ToolArgumentError(ToolError):
    """The arguments were not valid JSON, or did not fit the tool's schema."""


class ToolExecutionError(ToolError):
    """The tool itself failed; `__cause__` holds what it raised."""

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        self.tool = tool
        super().__init__(message)


class UpstreamToolError(ToolExecutionError):
    """An upstream MCP tool answered with `isError`: the message is the server's own text; the
    gateway's context (which server, which tool) is in `trace`, and the server's content blocks,
    for a served client, in `content`."""

    def __init__(self, message: str, *, tool: str | None = None, trace: Any = None, content: Any = None) -> None:
        super().__init__(message, tool=tool)
        self.trace = trace
        self.content = content


class ToolRegistrationError(ToolError):
    """A tool could not be registered (a duplicate, a reserved or illegal name, a bad schema)."""


class ToolPreconditionError(ToolArgumentError):
    """The call fit the schema, but what it acts on is not as it expects: no such file, old_string
    not found, a patch whose context is missing. The tool ran and failed (CLI exit code 4)."""


class PathNotFoundError(ToolPreconditionError):
    """The path names nothing (no such file or folder inside the roots)."""


class PathExistsError(ToolPreconditionError):
    """Something is already there, and the call may not replace it (a create)."""


class StaleFileError(ToolPreconditionError):
    """A rewrite was refused: the file changed since this session last read or wrote it (or, in
    strict mode, the session never read it). Read it again and redo the change."""


class PathDeniedError(ToolArgumentError):
    """A path resolved outside the context's roots, or a write targeted a read-only root."""


class ToolTimeoutError(ToolExecutionError):
    """The tool did not finish within its time limit."""


class UpstreamRequestError(ToolExecutionError):
    """An upstream MCP server answered a call with a JSON-RPC error that a served client gets as
    it is, code and data (-32042: the user must open a URL first); `trace` holds it, the message
    says it in words."""

    def __init__(self, message: str, *, tool: str | None = None, error: Mapping[str, Any]) -> None:
        super().__init__(message, tool=tool)
        self.trace = {"mcp_error": dict(error)}


class UpstreamInputRequired(ToolExecutionError):
    """A 2026-07-28 upstream needs its user's input before the call can go on, and the call's
    client answers by retrying (a 2026-07-28 served client): `trace` holds the upstream's
    `input_required` result, which the served door hands to the client."""

    def __init__(self, message: str, *, tool: str | None = None, result: Mapping[str, Any]) -> None:
        super().__init__(message, tool=tool)
        self.trace = {"input_required": dict(result)}


class PolicyDeniedError(ToolError):
    """An operator's policy refused the call (the message is the rule's reason, word for word)."""

    def __init__(self, message: str, *, tool: str | None = None, rule: str | None = None) -> None:
        self.tool = tool
        self.rule = rule
        super().__init__(message)


class ApprovalRequiredError(ToolError):
    """An operator's policy holds the call until a person approves it; nothing ran."""

    def __init__(self, message: str, *, tool: str | None = None, rule: str | None = None) -> None:
        self.tool = tool
        self.rule = rule
        super().__init__(message)
