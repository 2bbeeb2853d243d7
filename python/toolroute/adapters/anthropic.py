"""Anthropic adapter: tool definitions for the Messages API, and `tool_use` -> `tool_result`.

    tools = AnthropicTools(router, functions=["read_file", "grep"])
    message = client.messages.create(model=..., messages=messages, tools=tools.anthropic_tools(), ...)
    messages += [{"role": "assistant", "content": message.content}, tools.tool_result_message(message)]

Only exposed tools run; any other name the model produces gets an `is_error` result back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools
from toolroute.formats import to_anthropic

require("anthropic", "anthropic")

if TYPE_CHECKING:
    from anthropic.types import Message, MessageParam, ToolParam, ToolResultBlockParam


def _tool_uses(source: Any) -> list[Any]:
    """The `tool_use` blocks of a Message (or of an iterable of content blocks)."""
    blocks = source.content if hasattr(source, "content") else source
    return [block for block in blocks if getattr(block, "type", None) == "tool_use"]


def _result_block(block: Any, outcome: CallOutcome) -> ToolResultBlockParam:
    result: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": block.id, "content": outcome.text}
    if outcome.is_error:
        result["is_error"] = True
    return result


class AnthropicTools(ExposedTools):
    """An allowlist of router tools in Anthropic's shapes."""

    def anthropic_tools(self) -> list[ToolParam]:
        """`tools=` for `messages.create`: `{name, description, input_schema}`."""
        return to_anthropic(self.tool_definitions)  # type: ignore[return-value]

    def tool_results(self, source: Message | Iterable[Any]) -> list[ToolResultBlockParam]:
        """Run every `tool_use` block in order; one `tool_result` block per call."""
        return [_result_block(block, self.execute(block.name, block.input)) for block in _tool_uses(source)]

    async def atool_results(self, source: Message | Iterable[Any]) -> list[ToolResultBlockParam]:
        return [_result_block(block, await self.aexecute(block.name, block.input)) for block in _tool_uses(source)]

    def tool_result_message(self, source: Message | Iterable[Any]) -> MessageParam:
        """The `user` turn that answers the assistant's tool calls."""
        return {"role": "user", "content": self.tool_results(source)}

    async def atool_result_message(self, source: Message | Iterable[Any]) -> MessageParam:
        return {"role": "user", "content": await self.atool_results(source)}


__all__ = ["AnthropicTools"]
