"""The tools one agent was shown, and the only door to the router for that agent's calls.

A model can name a tool it was never given (hallucination, prompt injection); AI4J's server ran
such names anyway. Every adapter and the MCP server run calls through `ExposedTools`, which
refuses any name outside the exposed list before the router sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolroute.errors import ToolError
from toolroute.gateway import ToolDefinition
from toolroute.router import ToolRouter

Arguments = str | Mapping[str, Any] | None


@dataclass(frozen=True)
class CallOutcome:
    """What one tool call produced for the model: text, and whether it is an error report."""

    text: str
    is_error: bool = False
    trace: Any = None


class ExposedTools:
    """A fixed allowlist over a router: `get_all_tools(functions, mcp_servers, user_id)`."""

    def __init__(
        self,
        router: ToolRouter,
        functions: Sequence[str] = (),
        mcp_servers: Sequence[str] = (),
        user_id: str | None = None,
    ) -> None:
        self.router = router
        self.user_id = user_id
        self.tool_definitions: list[ToolDefinition] = router.get_all_tools(list(functions), list(mcp_servers), user_id)
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
        """Run one call if `name` is exposed; tool errors become error outcomes, never raise."""
        if name not in self.definitions:
            return self.refusal(name)
        try:
            output = self.router.execute(name, arguments, self.user_id)
        except ToolError as exc:
            return CallOutcome(str(exc), is_error=True)
        return CallOutcome(output.text, trace=output.trace)

    async def aexecute(self, name: str, arguments: Arguments = None) -> CallOutcome:
        if name not in self.definitions:
            return self.refusal(name)
        try:
            output = await self.router.aexecute(name, arguments, self.user_id)
        except ToolError as exc:
            return CallOutcome(str(exc), is_error=True)
        return CallOutcome(output.text, trace=output.trace)


def model_text(outcome: CallOutcome) -> str:
    """For formats without an error flag: mark errors in the text itself."""
    return f"Error: {outcome.text}" if outcome.is_error else outcome.text
