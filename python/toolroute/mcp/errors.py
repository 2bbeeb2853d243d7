"""Turn what escapes the SDK (nested exception groups, `MCPError`, `OSError`) into toolroute errors."""

from __future__ import annotations

import asyncio
import sys

from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from toolroute.errors import ToolError, ToolExecutionError, ToolTimeoutError
from toolroute.textsafety import neutralize

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

_SESSION_LOST = ("session not found", "session terminated")


def leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if not _is_cancel(e)] or list(exc.exceptions)
        exc = inner[0]
    return exc


def _is_cancel(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError)


def is_connection_lost(exc: BaseException) -> bool:
    """The transport is gone (server exited, stream closed): reconnect before the next call."""
    exc = leaf(exc)
    return isinstance(exc, MCPError) and exc.error.code == CONNECTION_CLOSED


def is_session_lost(exc: BaseException) -> bool:
    """An HTTP server forgot our session (it restarted): re-initialise; the request never ran."""
    exc = leaf(exc)
    return isinstance(exc, MCPError) and any(s in exc.error.message.lower() for s in _SESSION_LOST)


def is_timeout(exc: BaseException) -> bool:
    exc = leaf(exc)
    return isinstance(exc, TimeoutError) or (isinstance(exc, MCPError) and exc.error.code == REQUEST_TIMEOUT)


def describe(exc: BaseException) -> str:
    """One line for an error; the server's own words reach a model, so controls are made visible."""
    exc = leaf(exc)
    if isinstance(exc, MCPError):
        return neutralize(f"MCP error {exc.error.code}: {exc.error.message}")
    return neutralize(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def translate(exc: BaseException, message: str, *, tool: str | None = None) -> ToolError:
    """A toolroute error for `exc`, prefixed with what we were doing."""
    inner = leaf(exc)
    if isinstance(inner, ToolError):
        return inner
    cls = ToolTimeoutError if is_timeout(inner) else ToolExecutionError
    err = cls(f"{message}: {describe(inner)}", tool=tool)
    err.__cause__ = inner
    return err
