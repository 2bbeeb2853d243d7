"""OpenAI Agents SDK adapter: router tools as `agents.FunctionTool`s.

    tools = AgentsTools(router, functions=["read_file", "grep"])
    agent = Agent(name="coder", tools=tools.function_tools())

Each tool runs through the router (sync tools in a worker thread); tool errors go back to the
model as text instead of failing the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolroute.adapters._optional import require
from toolroute.allowlist import ExposedTools, model_text

agents = require("agents", "agents", package="openai-agents")

if TYPE_CHECKING:
    from agents import FunctionTool
    from agents.tool_context import ToolContext


class AgentsTools(ExposedTools):
    """An allowlist of router tools as Agents SDK function tools."""

    def function_tools(self, *, approve_side_effects: bool = False) -> list[FunctionTool]:
        """One `FunctionTool` per exposed tool. With `approve_side_effects`, every tool not
        declared read-only needs the run's approval (`needs_approval`) before it executes."""
        return [self._function_tool(name, approve_side_effects) for name in self.names]

    def _function_tool(self, name: str, approve_side_effects: bool) -> FunctionTool:
        fn = self.definitions[name]

        async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> str:
            return model_text(await self.aexecute(name, arguments))

        read_only = self.router.traits(name, self.user_id).read_only
        tool: FunctionTool = agents.FunctionTool(
            name=name,
            description=fn.get("description", ""),
            params_json_schema=fn["parameters"],
            on_invoke_tool=on_invoke_tool,
            # Strict mode would make every optional parameter required; keep the router's schema.
            strict_json_schema=False,
            needs_approval=approve_side_effects and not read_only,
        )
        return tool


__all__ = ["AgentsTools"]
