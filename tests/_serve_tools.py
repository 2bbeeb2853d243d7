"""Function tools for the CLI and serve tests, loaded with `--modules _serve_tools` (tests/ on PYTHONPATH)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from toolroute import ToolExecutionError, ToolTimeoutError, function_tool, mcp_service, mcp_tool

MARKER_ENV = "TOOLROUTE_TEST_MARKER"


@function_tool(read_only=True, idempotent=True)
def echo(text: str, times: int = 1) -> str:
    """Repeat a text."""
    return text * times


class AddRequest(BaseModel):
    a: int = Field(description="first addend")
    b: int = Field(description="second addend")


@function_tool(name="add", read_only=True)
class Add:
    """Add two integers."""

    def apply(self, request: AddRequest) -> dict[str, int]:
        return {"sum": request.a + request.b}


@function_tool
def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@function_tool
def refuse(reason: str) -> str:
    """Fails the way a tool reports an expected failure."""
    raise ToolExecutionError(reason, tool="refuse")


@function_tool
def touch_marker() -> str:
    """Create the marker file named by $TOOLROUTE_TEST_MARKER: proof that the tool ran."""
    Path(os.environ[MARKER_ENV]).write_text("ran")
    return "touched"


@mcp_service("notes")
class Notes:
    """A tiny local MCP service."""

    @mcp_tool(read_only=True)
    def shout(self, text: str) -> str:
        """Upper-case a text."""
        return text.upper()


@function_tool
def too_slow() -> str:
    """Reports running out of time."""
    raise ToolTimeoutError("too_slow timed out after 0s", tool="too_slow")


@function_tool
def noisy() -> str:
    """Writes to stdout from Python and from a child process, as careless tools do."""
    import subprocess
    import sys

    print("stray print")
    sys.stdout.flush()
    subprocess.run(["echo", "stray child output"], check=True)
    return "still fine"


@function_tool(read_only=True)
def nap(seconds: float) -> str:
    """Sleep a little (at most 5 s): a call that holds its slot, for the per-user limit tests."""
    import time

    time.sleep(min(max(seconds, 0.0), 5.0))
    return "rested"


@function_tool(name="stubborn")
def stubborn(seconds: float) -> str:
    """Sleep, deaf to cancellation (a thread cannot be stopped): for the shutdown bound tests."""
    import time

    time.sleep(min(max(seconds, 0.0), 120.0))
    return "finally"
