"""docs/usage.md's framework examples run as written (issue 42): each block runs in a scratch
project after a prelude that makes `router` (the built-ins, a workspace with a typo in
notes.txt) and that framework's own scripted model under the name the block uses (`model`,
`llm`, `chat_model`); the scripted model reads the file, then edits it. A block that reaches a
provider over the network only compiles. Each run must end with the typo fixed, once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)

ROUTER = """
from toolroute import BuiltInToolContext, ToolRouter
router = ToolRouter(context=BuiltInToolContext("."))
READ = {"path": "notes.txt"}
EDIT = {"path": "notes.txt", "old_string": "teh", "new_string": "the"}
"""

PRELUDES = {
    "toolroute.adapters.openai_agents": """
from agents.testing import ScriptedModel, assistant_message, function_call
model = ScriptedModel([[function_call("read_file", READ, call_id="r1")], [function_call("edit", EDIT, call_id="e1")],
                       [assistant_message("fixed")]])
""",
    "toolroute.adapters.pydantic_ai": """
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
def script(messages, info):
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    calls = [[ToolCallPart("read_file", READ, tool_call_id="r1")], [ToolCallPart("edit", EDIT, tool_call_id="e1")]]
    return ModelResponse(parts=calls[turn] if turn < len(calls) else [TextPart("fixed")])
model = FunctionModel(script)
""",
    "toolroute.adapters.adk": """
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types as _types
class Scripted(BaseLlm):
    model: str = "scripted"
    turn: int = 0
    async def generate_content_async(self, request, stream=False):
        calls = [("read_file", READ), ("edit", EDIT)]
        turn, self.turn = self.turn, self.turn + 1
        if turn < len(calls):
            call = _types.FunctionCall(id=f"c{turn}", name=calls[turn][0], args=calls[turn][1])
            part = _types.Part(function_call=call)
        else:
            part = _types.Part(text="fixed")
        yield LlmResponse(content=_types.Content(role="model", parts=[part]))
model = Scripted()
""",
    "toolroute.adapters.llama_index": """
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
def script(messages, **kwargs):
    turn = sum(m.role == MessageRole.ASSISTANT for m in messages)
    calls = [("r1", "read_file", READ), ("e1", "edit", EDIT)]
    if turn >= len(calls):
        return ChatMessage(role=MessageRole.ASSISTANT, content="fixed")
    call_id, name, args = calls[turn]
    block = ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs=args)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])
llm = MockFunctionCallingLLM(response_generator=script)
""",
    "toolroute.adapters.smolagents": """
import json
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model
class Scripted(Model):
    def generate(self, messages, *args, **kwargs):
        turn = sum(m.role == MessageRole.ASSISTANT for m in messages)
        calls = [("read_file", READ), ("edit", EDIT), ("final_answer", {"answer": "fixed"})]
        name, arguments = calls[min(turn, 2)]
        function = ChatMessageToolCallFunction(name=name, arguments=json.dumps(arguments))
        call = ChatMessageToolCall(function=function, id=f"c{turn}", type="function")
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])
model = Scripted(model_id="scripted")
""",
    "toolroute.adapters.langchain": """
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
class ScriptedChat(FakeMessagesListChatModel):
    def bind_tools(self, tools, **kwargs):
        return self
chat_model = ScriptedChat(responses=[
    AIMessage("", tool_calls=[{"name": "read_file", "args": READ, "id": "r1"}]),
    AIMessage("", tool_calls=[{"name": "edit", "args": EDIT, "id": "e1"}]),
    AIMessage("fixed"),
])
messages = [("user", "fix the typo in notes.txt")]
""",
}
CHECK_ONLY = ("from openai import", "from anthropic import")  # a provider's client over the network


def _blocks() -> list[str]:
    return BLOCK.findall(USAGE.read_text())


def _adapter(body: str) -> str | None:
    found = re.search(r"^from (toolroute\.adapters\.\w+) import", body, re.M)
    return found.group(1) if found else None


def test_every_framework_block_is_run_or_checked() -> None:
    for body in _blocks():
        adapter = _adapter(body)
        if adapter is not None:
            assert adapter in PRELUDES or body.startswith(CHECK_ONLY), (
                f"classify this docs/usage.md block:\n{body[:200]}"
            )


@pytest.mark.parametrize("body", [b for b in _blocks() if _adapter(b) in PRELUDES], ids=lambda b: _adapter(b))
def test_framework_examples_run_as_written(tmp_path: Path, body: str) -> None:
    (tmp_path / "notes.txt").write_text("teh notes\n")
    source = ROUTER + PRELUDES[str(_adapter(body))] + body
    done = subprocess.run([sys.executable, "-c", source], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    if "notes.txt" in body:  # the examples that ask for the fix: made, once
        assert (tmp_path / "notes.txt").read_text() == "the notes\n"
        assert "fixed" in done.stdout


@pytest.mark.parametrize("body", [b for b in _blocks() if b.startswith(CHECK_ONLY)])
def test_provider_examples_compile(body: str) -> None:
    compile(body, "docs/usage.md", "exec")
