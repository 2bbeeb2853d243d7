"""LangChain adapter: router tools as `BaseTool`s, on `langchain-core` alone.

(`langchain-mcp-adapters` pins `mcp<2` and cannot be installed beside toolroute.)

    tools = LangChainTools(router, functions=["read_file", "grep"])
    ai_message = ChatOpenAI(...).bind_tools(tools.base_tools()).invoke(messages)
    messages += [ai_message, *tools.tool_messages(ai_message)]  # one ToolMessage per call

Tool errors, and calls of a name the model invented, come back as `ToolMessage(status="error")`
for the model to read, not as exceptions; an invented name runs nothing.
"""

from __future__ import annotations

from typing import Any

from toolroute.adapters._optional import require
from toolroute.allowlist import ExposedTools

require("langchain_core", "langchain", package="langchain-core")

from langchain_core.callbacks import (  # noqa: E402  (after the friendly import check)
    AsyncCallbackManagerForToolRun,
    CallbackManagerForToolRun,
)
from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, ToolException  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402


class RouterTool(BaseTool):
    """One router tool; arguments are validated by the router, against the same schema."""

    handle_tool_error: bool = True
    _exposed: ExposedTools = PrivateAttr()

    def __init__(self, exposed: ExposedTools, name: str) -> None:
        fn = exposed.definitions[name]
        super().__init__(name=name, description=fn.get("description", ""), args_schema=fn["parameters"])
        self._exposed = exposed

    def _run(self, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any) -> str:
        outcome = self._exposed.execute(self.name, kwargs)
        if outcome.is_error:
            raise ToolException(outcome.text)
        return outcome.text

    async def _arun(self, run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any) -> str:
        outcome = await self._exposed.aexecute(self.name, kwargs)
        if outcome.is_error:
            raise ToolException(outcome.text)
        return outcome.text


class LangChainTools(ExposedTools):
    """An allowlist of router tools as LangChain tools."""

    def base_tools(self) -> list[BaseTool]:
        return [RouterTool(self, name) for name in self.names]

    def _tool(self, name: str) -> RouterTool:
        tools: dict[str, RouterTool] = self.__dict__.setdefault("_tools", {})
        if name not in tools:
            tools[name] = RouterTool(self, name)
        return tools[name]

    def _refusal_message(self, call: dict[str, Any]) -> ToolMessage:
        text = self.refusal(str(call.get("name"))).text
        return ToolMessage(content=text, tool_call_id=call.get("id") or "", name=call.get("name"), status="error")

    def tool_messages(self, source: Any) -> list[ToolMessage]:
        """Run every tool call of `source` (an AIMessage, or its `tool_calls`), in order; one
        `ToolMessage` per call. A name outside the allowlist runs nothing and answers an error."""
        calls = getattr(source, "tool_calls", source)
        return [self._tool(c["name"]).invoke(c) if c.get("name") in self else self._refusal_message(c) for c in calls]

    async def atool_messages(self, source: Any) -> list[ToolMessage]:
        calls = getattr(source, "tool_calls", source)
        return [
            await self._tool(c["name"]).ainvoke(c) if c.get("name") in self else self._refusal_message(c) for c in calls
        ]


__all__ = ["LangChainTools", "RouterTool"]
