"""The tools one agent was shown, and the only door to the router for that agent's calls.

A model can name a tool it was never given (hallucination, prompt injection); AI4J's server ran
such names anyway. Every adapter and the MCP server run calls through `ExposedTools`, which holds
the exposure by identity: each exposed name is bound to the very tool it was listed for, a call
runs exactly that tool, and any other name is refused before the router sees it. Whatever an
upstream server later advertises (a `bash`, a host function's name, via `list_changed`) cannot
change what an exposed name runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolroute._twins import Body, Step, run_async, run_sync
from toolroute.errors import ToolError
from toolroute.exposure import Exposure
from toolroute.router import ToolRouter
from toolroute.types import ToolDefinition

Arguments = str | Mapping[str, Any] | None


@dataclass(frozen=True)
class CallOutcome:
    """What one tool call produced for the model: text, and whether it is an error report."""

    text: str
    is_error: bool = False
    trace: Any = None


class ExposedTools:
    """A fixed allowlist over a router: `get_all_tools(functions, mcp_servers, user_id)`, plus
    `user_servers`, the ids of that user's own servers."""

    def __init__(
        self,
        router: ToolRouter,
        functions: Sequence[str] = (),
        mcp_servers: Sequence[str] = (),
        user_id: str | None = None,
        *,
        user_servers: Sequence[str] = (),
    ) -> None:
        self.router = router
        self.user_id = user_id
        self.request = (tuple(functions), tuple(mcp_servers), tuple(user_servers))  # to expose it again
        self.exposure: Exposure = router.expose(
            list(functions), list(mcp_servers), user_id, user_servers=list(user_servers)
        )
        self.tool_definitions: list[ToolDefinition] = self.exposure.definitions
        self.definitions: dict[str, dict[str, Any]] = {
            t["function"]["name"]: t["function"] for t in self.tool_definitions
        }

    @property
    def names(self) -> list[str]:
        return list(self.definitions)

    def __contains__(self, name: object) -> bool:
        return name in self.definitions

    def refusal(self, name: str) -> CallOutcome:
        # The same answer for unknown and for existing-but-unexposed names: nothing leaks.
        return CallOutcome(f"tool {name!r} is not available here", is_error=True)

    def execute(self, name: str, arguments: Arguments = None) -> CallOutcome:
        """Run the tool exposed as `name`, if any; tool errors become error outcomes, never raise."""
        return run_sync(self._call(name, arguments))

    async def aexecute(self, name: str, arguments: Arguments = None) -> CallOutcome:
        return await run_async(self._call(name, arguments))

    def _call(self, name: str, arguments: Arguments) -> Body[CallOutcome]:
        """One call through the exposure, written once; running the tool is the twinned step."""
        tool = self.exposure.get(name)
        if tool is None:
            return self.refusal(name)
        try:
            output = yield Step(self.router.run, self.router.arun, (tool, arguments))
        except ToolError as exc:
            return CallOutcome(str(exc), is_error=True)
        return CallOutcome(output.text, trace=output.trace)


def model_text(outcome: CallOutcome) -> str:
    """For formats without an error flag: mark errors in the text itself."""
    return f"Error: {outcome.text}" if outcome.is_error else outcome.text
