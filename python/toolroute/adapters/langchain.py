"""LangChain adapter: router tools as `BaseTool`s, on `langchain-core` alone.

(`langchain-mcp-adapters` pins `mcp<2` and cannot be installed beside toolroute.)

    tools = {t.name: t for t in LangChainTools(router, functions=["read_file", "grep"]).base_tools()}
    ai_message = ChatOpenAI(...).bind_tools(list(tools.values())).invoke(messages)
    messages += [ai_message, *(tools[c["name"]].invoke(c) for c in ai_message.tool_calls)]  # ToolMessages

Tool errors come back as `ToolMessage(status="error")` for the model to read, not as exceptions.
"""

from __future__ import annotations

from typing import Any

from toolroute.adapters._optional import require
from toolroute.adapters.allowlist import ExposedTools

require("langchain_core", "langchain", package="langchain-core")

from langchain_core.callbacks import (  # noqa: E402  (after the friendly import check)
    AsyncCallbackManagerForToolRun,
    CallbackManagerForToolRun,
)
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


__all__ = ["LangChainTools", "RouterTool"]
