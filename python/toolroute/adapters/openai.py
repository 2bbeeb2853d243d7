"""OpenAI adapter: tool definitions for Chat Completions and the Responses API, and the messages
that answer a model's tool calls.

    tools = OpenAITools(router, functions=["read_file", "grep"])
    completion = client.chat.completions.create(model=..., messages=messages, tools=tools.chat_tools())
    messages += [completion.choices[0].message, *tools.tool_messages(completion)]

Only exposed tools run; any other name the model produces gets an error message back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, model_text
from toolroute.formats import to_responses

require("openai", "openai")

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessage,
        ChatCompletionMessageToolCallUnion,
        ChatCompletionToolMessageParam,
        ChatCompletionToolParam,
    )
    from openai.types.responses import FunctionToolParam, Response
    from openai.types.responses.response_input_param import FunctionCallOutput

    ToolCallSource = ChatCompletion | ChatCompletionMessage | Iterable[ChatCompletionMessageToolCallUnion]


def _tool_calls(source: Any) -> list[Any]:
    """The tool calls of a completion (first choice), a message, or an iterable of calls."""
    if hasattr(source, "choices"):
        source = source.choices[0].message if source.choices else None
    if source is None:
        return []
    if hasattr(source, "tool_calls"):
        return list(source.tool_calls or [])
    return list(source)


def _function_calls(response: Any) -> list[Any]:
    """The `function_call` items of a Responses API response (or an iterable of output items)."""
    items = response.output if hasattr(response, "output") else response
    return [item for item in items if getattr(item, "type", None) == "function_call"]


class OpenAITools(ExposedTools):
    """An allowlist of router tools in OpenAI's shapes."""

    def chat_tools(self) -> list[ChatCompletionToolParam]:
        """`tools=` for `chat.completions.create` (strict mode off: it would make every field required)."""
        return [{"type": "function", "function": dict(fn)} for fn in self.definitions.values()]  # type: ignore[typeddict-item]

    def responses_tools(self) -> list[FunctionToolParam]:
        """`tools=` for `responses.create`: the flat function tool shape, `strict` true only for
        schemas strict mode takes as they are (see `toolroute.formats.strict_eligible`)."""
        return to_responses(self.tool_definitions)  # type: ignore[return-value]

    # ---- Chat Completions ---------------------------------------------------------------

    def _call_outcome(self, call: Any) -> CallOutcome:
        if getattr(call, "type", "function") != "function":
            return CallOutcome(f"tool call type {call.type!r} is not supported; use function tools", is_error=True)
        return self.execute(call.function.name, call.function.arguments)

    async def _acall_outcome(self, call: Any) -> CallOutcome:
        if getattr(call, "type", "function") != "function":
            return CallOutcome(f"tool call type {call.type!r} is not supported; use function tools", is_error=True)
        return await self.aexecute(call.function.name, call.function.arguments)

    @staticmethod
    def _tool_message(call: Any, outcome: CallOutcome) -> ChatCompletionToolMessageParam:
        return {"role": "tool", "tool_call_id": call.id, "content": model_text(outcome)}

    def tool_messages(self, source: ToolCallSource) -> list[ChatCompletionToolMessageParam]:
        """Run every tool call of `source` (a ChatCompletion, its message, or the calls), in order;
        returns one `tool` message per call, errors included as text."""
        return [self._tool_message(call, self._call_outcome(call)) for call in _tool_calls(source)]

    async def atool_messages(self, source: ToolCallSource) -> list[ChatCompletionToolMessageParam]:
        return [self._tool_message(call, await self._acall_outcome(call)) for call in _tool_calls(source)]

    # ---- Responses API ------------------------------------------------------------------

    @staticmethod
    def _output_item(call: Any, outcome: CallOutcome) -> FunctionCallOutput:
        return {"type": "function_call_output", "call_id": call.call_id, "output": model_text(outcome)}

    def function_call_outputs(self, response: Response | Iterable[Any]) -> list[FunctionCallOutput]:
        """Run each `function_call` item of a Responses API response; returns the input items
        to send back (`function_call_output`, matched by `call_id`)."""
        return [self._output_item(call, self.execute(call.name, call.arguments)) for call in _function_calls(response)]

    async def afunction_call_outputs(self, response: Response | Iterable[Any]) -> list[FunctionCallOutput]:
        return [
            self._output_item(call, await self.aexecute(call.name, call.arguments))
            for call in _function_calls(response)
        ]


__all__ = ["OpenAITools"]
