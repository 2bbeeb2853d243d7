"""Issue 61 through the provider SDKs: a real MCP server (stdio) answers in text, an image, audio,
an embedded PDF, an embedded text and a resource link; the OpenAI (Chat Completions, Responses)
and Anthropic adapters answer the model's call, the real SDK sends the next request to a
recording stand-in of the API on 127.0.0.1, and what that request carries is what the model
receives: the server's bytes, unchanged and in order, or (what the API cannot carry) words
saying so at their place."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _media_helpers import (
    NOT_PASSED,
    PDF,
    PNG,
    WAV,
    Item,
    data_url_bytes,
    media_router,
    recording_api,
    said_not_passed,
    trail,
)
from anthropic import Anthropic
from anthropic.types import Message, ToolResultBlockParam
from openai import OpenAI
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputItemParam
from pydantic import TypeAdapter

from toolroute.adapters._content import anthropic_content, chat_split, error_marked, outcome_parts, responses_output
from toolroute.adapters.anthropic import AnthropicTools
from toolroute.adapters.openai import OpenAITools
from toolroute.allowlist import CallOutcome, OutcomeKind

CALL = "call_media"


def chat_call() -> ChatCompletionMessage:
    return ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [{"id": CALL, "type": "function", "function": {"name": "showcase", "arguments": "{}"}}],
        }
    )


def responses_call() -> Response:
    return Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 0,
            "model": "scripted",
            "output": [{"type": "function_call", "call_id": CALL, "name": "showcase", "arguments": "{}"}],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


def anthropic_call() -> Message:
    return Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": [{"type": "tool_use", "id": CALL, "name": "showcase", "input": {}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def chat_items(parts: Any) -> list[Item]:
    """A Chat Completions message content as the model reads it."""
    if isinstance(parts, str):
        return [("text", parts)]
    out: list[Item] = []
    for part in parts:
        if part["type"] == "text":
            out.append(("text", part["text"]))
        elif part["type"] == "image_url":
            out.append(("bytes", data_url_bytes(part["image_url"]["url"])))
        elif part["type"] == "input_audio":
            assert part["input_audio"]["format"] == "wav"
            out.append(("bytes", base64.b64decode(part["input_audio"]["data"])))
        elif part["type"] == "file":
            assert part["file"]["filename"] == "q3.pdf"
            out.append(("bytes", data_url_bytes(part["file"]["file_data"])))
        else:
            raise AssertionError(part)
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_chat_completions_the_tool_message_then_the_media_in_a_user_message(tmp_path: Path, mode: str) -> None:
    with media_router(tmp_path) as router, recording_api() as (url, bodies):
        tools = OpenAITools(router, [], ["media"])
        call = chat_call()
        answers = tools.tool_messages(call) if mode == "sync" else anyio.run(tools.atool_messages, call)
        history = [{"role": "user", "content": "show me"}, call.model_dump(exclude_none=True), *answers]
        OpenAI(base_url=url, api_key="k").chat.completions.create(model="scripted", messages=history)
    sent = bodies[0]["messages"]
    # The tool message right after the call (text only, as the API takes it), the media after all of them.
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    tool, media = sent[2], sent[3]
    assert tool["tool_call_id"] == CALL and isinstance(tool["content"], str)
    assert trail(chat_items(tool["content"])) == ["B", "i", "w", "p", "N", "L", "A"]
    assert nothing_said_left_out(chat_items(tool["content"]))
    assert trail(chat_items(media["content"])) == ["IMG", "WAV", "PDF"]
    assert CALL in media["content"][0]["text"]  # the user message says whose media it holds


def nothing_said_left_out(items: list[Item]) -> bool:
    """Chat Completions carries all three: nothing is said to be left out."""
    return not any(said_not_passed(items, mark) for mark in ("i", "w", "p"))


def responses_items(output: Any) -> list[Item]:
    if isinstance(output, str):
        return [("text", output)]
    out: list[Item] = []
    for item in output:
        if item["type"] == "input_text":
            out.append(("text", item["text"]))
        elif item["type"] == "input_image":
            out.append(("bytes", data_url_bytes(item["image_url"])))
        elif item["type"] == "input_file":
            assert item["filename"] == "q3.pdf"
            out.append(("bytes", data_url_bytes(item["file_data"])))
        else:
            raise AssertionError(item)
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_responses_a_function_call_output_with_input_image_and_input_file(tmp_path: Path, mode: str) -> None:
    with media_router(tmp_path) as router, recording_api() as (url, bodies):
        tools = OpenAITools(router, [], ["media"])
        response = responses_call()
        outputs = tools.call_outputs(response) if mode == "sync" else anyio.run(tools.acall_outputs, response)
        items = [*[o.model_dump(exclude_none=True) for o in response.output], *outputs]
        OpenAI(base_url=url, api_key="k").responses.create(model="scripted", input=items)
    (answer,) = [i for i in bodies[0]["input"] if i["type"] == "function_call_output"]
    assert answer["call_id"] == CALL
    received = responses_items(answer["output"])
    assert trail(received) == ["B", "IMG", "w", "PDF", "N", "L", "A"]
    assert said_not_passed(received, "w")  # a Responses tool output has no audio: said at its place


def anthropic_items(content: Any) -> list[Item]:
    if isinstance(content, str):
        return [("text", content)]
    out: list[Item] = []
    for block in content:
        if block["type"] == "text":
            out.append(("text", block["text"]))
        elif block["type"] in ("image", "document"):
            assert block["source"]["type"] == "base64"
            if block["type"] == "document":
                assert block["source"]["media_type"] == "application/pdf" and block["title"] == "q3.pdf"
            out.append(("bytes", base64.b64decode(block["source"]["data"])))
        else:
            raise AssertionError(block)
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_anthropic_a_tool_result_with_image_and_document_blocks(tmp_path: Path, mode: str) -> None:
    with media_router(tmp_path) as router, recording_api() as (url, bodies):
        tools = AnthropicTools(router, [], ["media"])
        message = anthropic_call()
        turn = tools.tool_result_message(message) if mode == "sync" else anyio.run(tools.atool_result_message, message)
        history = [
            {"role": "user", "content": "show me"},
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
            turn,
        ]
        Anthropic(base_url=url.removesuffix("/v1"), api_key="k").messages.create(
            model="scripted", max_tokens=10, messages=history
        )
    (result,) = bodies[0]["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == CALL and "is_error" not in result
    received = anthropic_items(result["content"])
    assert trail(received) == ["B", "IMG", "w", "PDF", "N", "L", "A"]
    assert said_not_passed(received, "w")  # no audio in a tool result: said at its place


def test_a_result_without_media_is_the_text_it_always_was(tmp_path: Path) -> None:
    """A text-only answer keeps its plain-string form in every provider shape."""
    with media_router(tmp_path) as router:
        (tmp_path / "notes.txt").write_text("alpha\n")
        tools = OpenAITools(router, ["read_file"])
        message = ChatCompletionMessage.model_validate(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "t",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'},
                    }
                ],
            }
        )
        (only,) = tools.tool_messages(message)
        assert only["content"] == "     1\talpha"


def test_an_upstream_error_with_an_image_keeps_the_image_and_the_error(tmp_path: Path) -> None:
    """The error flag (Anthropic) or the `Error:` text (Responses) stands beside the blocks."""
    image = types.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    outcome = CallOutcome("boom", OutcomeKind.FAILED, content=[types.TextContent(text="boom"), image])
    items = outcome_parts(outcome)
    assert anthropic_content(items)[1]["source"]["data"] == image.data
    marked = responses_output(error_marked(items, outcome))
    assert marked[0] == {"type": "input_text", "text": "Error: boom"} and marked[1]["type"] == "input_image"


def test_hostile_media_is_said_not_passed_and_never_breaks_the_request() -> None:
    """A server's block with data that is not base64, or a type no API takes, becomes words."""
    blocks = [
        types.ImageContent(data="not base64!!", mime_type="image/png"),
        types.ImageContent(data="PHN2Zy8+", mime_type="image/svg+xml"),
        types.AudioContent(data="AAAA", mime_type="audio/ogg"),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(uri="file:///x.zip", mime_type="application/zip", blob="UEsDBA==")
        ),
    ]
    items = outcome_parts(CallOutcome("", content=blocks))
    anthropic = anthropic_content(items)
    assert all(b["type"] == "text" and NOT_PASSED in b["text"] for b in anthropic), anthropic
    assert "not valid base64" in anthropic[0]["text"]
    responses = responses_output(items)
    assert [r["type"] for r in responses] == ["input_text", "input_text", "input_text", "input_file"]
    text, media = chat_split(items)
    assert media == [] and text.count(NOT_PASSED) == 4


def test_the_sdks_validate_what_the_adapters_send(tmp_path: Path) -> None:
    """The shapes are the SDKs' own params (their TypedDicts), as the API documents them."""
    with media_router(tmp_path) as router:
        chat = OpenAITools(router, [], ["media"]).tool_messages(chat_call())
        responses = OpenAITools(router, [], ["media"]).call_outputs(responses_call())
        anthropic = AnthropicTools(router, [], ["media"]).tool_results(anthropic_call())
    for message in chat:
        TypeAdapter(ChatCompletionMessageParam).validate_python(message)
    for item in responses:
        TypeAdapter(ResponseInputItemParam).validate_python(item)
    for block in anthropic:
        TypeAdapter(ToolResultBlockParam).validate_python(block)
    assert json.dumps(anthropic)  # plain JSON all the way down
    assert {PNG, WAV, PDF}  # the fixtures are three distinct files


def test_a_result_cut_at_the_cap_keeps_its_media_in_place(tmp_path: Path) -> None:
    """The gateway's cap is on text: past it, the text is cut (and says so) but the image still
    reaches the model, where it stood; nothing becomes only a size."""
    from toolroute.mcp.results import DEFAULT_MAX_RESULT_CHARS

    with media_router(tmp_path) as router:
        tools = AnthropicTools(router, [], ["media"])
        message = Message.model_validate(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "scripted",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t",
                        "name": "long_then_picture",
                        "input": {"chars": DEFAULT_MAX_RESULT_CHARS + 500},
                    }
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
        (result,) = tools.tool_results(message)
    text, image, notice = result["content"]
    assert set(text["text"]) == {"x"} and len(text["text"]) + len(notice["text"]) <= DEFAULT_MAX_RESULT_CHARS
    assert base64.b64decode(image["source"]["data"]) == PNG
    assert "characters omitted" in notice["text"] and "the tail" not in json.dumps(result)
