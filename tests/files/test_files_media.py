"""read_file of images and PDFs (issue 61): each format as the image block a model receives
through the Anthropic and OpenAI adapters, the PDF's text per page (and its pages as images when
asked), the providers' limits (downscaled, or refused with the reason), the same confinement
and caps as text, and a clear word where the `media` extra is missing."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _files_helpers import router_for, write
from _media_helpers import make_pdf
from anthropic.types import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import Response
from PIL import Image

from toolroute.adapters.anthropic import AnthropicTools
from toolroute.adapters.openai import OpenAITools
from toolroute.context import ToolLimits
from toolroute.errors import PathDeniedError, ToolArgumentError, ToolError, ToolPreconditionError

PDF = (Path(__file__).resolve().parent.parent / "fixtures" / "media" / "report.pdf").read_bytes()
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
SUFFIX = {"PNG": "png", "JPEG": "jpg", "GIF": "gif", "WEBP": "webp"}


def picture(fmt: str, size: tuple[int, int] = (64, 48), noise: bool = False) -> bytes:
    image = Image.new("RGB", size)
    if noise:
        image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    else:
        image.putdata([(x * 4 % 256, y * 5 % 256, 90) for y in range(size[1]) for x in range(size[0])])
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def decoded(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


# ---- what the model receives, through the provider adapters ---------------------------------


def anthropic_read(router: Any, arguments: dict[str, Any], native: bool = False) -> dict[str, Any]:
    if native:
        tools = AnthropicTools(router, ["read_file", "write_file", "edit"], native=["text_editor"])
        name, arguments = "str_replace_based_edit_tool", {"command": "view", **arguments}
    else:
        tools, name = AnthropicTools(router, ["read_file"]), "read_file"
    message = Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": [{"type": "tool_use", "id": "t1", "name": name, "input": arguments}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    (result,) = tools.tool_results(message)
    return dict(result)


def responses_read(router: Any, arguments: dict[str, Any]) -> Any:
    response = Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 0,
            "model": "scripted",
            "output": [
                {"type": "function_call", "call_id": "t1", "name": "read_file", "arguments": json.dumps(arguments)}
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    (answer,) = OpenAITools(router, ["read_file"]).call_outputs(response)
    return answer["output"]


def chat_read(router: Any, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(arguments)}}
            ],
        }
    )
    return list(OpenAITools(router, ["read_file"]).tool_messages(message))


def data_of(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_image_format_reaches_the_model_as_an_image_block(tmp_path: Path, fmt: str) -> None:
    data = picture(fmt)
    name = f"pic.{SUFFIX[fmt]}"
    write(tmp_path, name, data)
    router = router_for(tmp_path)
    # Anthropic: a tool_result with a line saying what it is, then the image block: the file's own bytes.
    result = anthropic_read(router, {"path": name})
    caption, image = result["content"]
    assert caption["type"] == "text" and caption["text"].startswith(f"{name}: {FORMATS[fmt]} image, 64x48 pixels")
    assert image["type"] == "image" and image["source"]["media_type"] == FORMATS[fmt]
    assert base64.b64decode(image["source"]["data"]) == data and "is_error" not in result
    # Responses: input_text, then input_image with the same bytes.
    output = responses_read(router, {"path": name})
    assert [o["type"] for o in output] == ["input_text", "input_image"]
    assert data_of(output[1]["image_url"]) == data and output[1]["image_url"].startswith(f"data:{FORMATS[fmt]};")
    # Chat Completions: the tool message's text marks it; the user message after it carries it.
    tool, user = chat_read(router, {"path": name})
    assert tool["role"] == "tool" and "attached in the user message" in tool["content"]
    assert data_of(user["content"][1]["image_url"]["url"]) == data
    # And Claude's own text editor's view shows it alike.
    native = anthropic_read(router, {"path": str(tmp_path / name)}, native=True)
    assert base64.b64decode(native["content"][1]["source"]["data"]) == data


def test_a_pdf_is_its_text_per_page_and_its_pages_as_images_when_asked(tmp_path: Path) -> None:
    write(tmp_path, "report.pdf", PDF)
    router = router_for(tmp_path)
    text = anthropic_read(router, {"path": "report.pdf"})["content"]
    assert text == (
        "--- page 1 of 2 ---\nQuarterly report, page one\n--- page 2 of 2 ---\nTotals on page two"
    )  # text only: no media, so the plain string the tool result always had
    assert responses_read(router, {"path": "report.pdf", "pages": "2"}) == "--- page 2 of 2 ---\nTotals on page two"
    assert "Quarterly report" in anthropic_read(router, {"path": str(tmp_path / "report.pdf")}, native=True)["content"]
    blocks = anthropic_read(router, {"path": "report.pdf", "page_images": True})["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text", "image"]
    assert blocks[0]["text"].endswith("Quarterly report, page one")
    page = decoded(base64.b64decode(blocks[1]["source"]["data"]))
    assert page.format == "PNG" and max(page.size) <= ToolLimits().max_image_edge
    assert page.size[1] > page.size[0]  # a portrait letter page, rendered as one
    output = responses_read(router, {"path": "report.pdf", "pages": "1", "page_images": True})
    assert [o["type"] for o in output] == ["input_text", "input_image"]


def test_pdf_pages_are_chosen_capped_and_say_where_to_read_on(tmp_path: Path) -> None:
    write(tmp_path, "report.pdf", PDF)
    router = router_for(tmp_path, limits=ToolLimits(max_pdf_pages=1))
    out = router.execute("read_file", {"path": "report.pdf"})
    assert out.text.endswith('[… showing pages 1 of 2. To read on, call read_file with pages="2-2".]')
    assert out.trace["pages_shown"] == [1] and out.trace["truncated"] is True
    with pytest.raises(ToolArgumentError, match="at most 1 at a time"):
        router.invoke("read_file", {"path": "report.pdf", "pages": "1-2"})
    write(tmp_path, "long.pdf", make_pdf(["a" * 300, "b" * 300, "c" * 300]))
    capped = router_for(tmp_path).execute("read_file", {"path": "long.pdf", "max_chars": 500})
    assert len(capped.text) <= 500 and "a" * 300 in capped.text and "bbb" not in capped.text
    assert capped.text.endswith(
        '[… showing pages 1 of 3 (cut by the output cap). To read on, call read_file with pages="2-3".]'
    )
    cut = router_for(tmp_path).execute("read_file", {"path": "long.pdf", "max_chars": 250})
    assert len(cut.text) <= 250 and 'pages="2-3"' in cut.text  # the first page alone is cut, the note stays
    for bad in ("0", "3-1", "x", "9"):
        with pytest.raises(ToolArgumentError, match="pages"):
            router_for(tmp_path).invoke("read_file", {"path": "report.pdf", "pages": bad})
    write(tmp_path, "notes.txt", "text\n")
    with pytest.raises(ToolArgumentError, match="for PDFs"):
        router_for(tmp_path).invoke("read_file", {"path": "notes.txt", "pages": "1"})


# ---- the providers' limits --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_an_oversized_image_is_downscaled_to_the_limits_and_says_so(tmp_path: Path, fmt: str) -> None:
    data = picture(fmt, (5000, 1250))
    write(tmp_path, "wide", data)
    result = anthropic_read(router_for(tmp_path), {"path": "wide"})
    caption, image = result["content"]
    assert "downscaled from 5000x1250" in caption["text"]
    shown = decoded(base64.b64decode(image["source"]["data"]))
    assert shown.size == (2000, 500) and shown.format == fmt  # a photo stays a JPEG, the rest a PNG
    assert len(base64.b64decode(image["source"]["data"])) <= ToolLimits().max_image_bytes


def test_an_image_that_stays_too_large_is_refused_with_the_reason(tmp_path: Path) -> None:
    write(tmp_path, "noise.png", picture("PNG", (300, 300), noise=True))
    router = router_for(tmp_path, limits=ToolLimits(max_image_bytes=400))
    with pytest.raises(ToolPreconditionError, match=r"is not shown as an image: even at .* over the 400"):
        router.invoke("read_file", {"path": "noise.png"})
    result = anthropic_read(router, {"path": "noise.png"})
    assert result["is_error"] is True and "over the 400 one image may take" in result["content"]


def test_a_decompression_bomb_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    bomb = io.BytesIO()
    Image.new("1", (10_000, 6_000)).save(bomb, "PNG")  # 60 million pixels in a few kilobytes
    write(tmp_path, "bomb.png", bomb.getvalue())
    with pytest.raises(ToolPreconditionError, match="10000x6000 pixels, over the 50000000"):
        router_for(tmp_path).invoke("read_file", {"path": "bomb.png"})


def test_an_animated_gif_is_its_first_frame(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (20, 20), (i * 100, 0, 0)) for i in range(3)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=50)
    write(tmp_path, "anim.gif", out.getvalue())
    output = router_for(tmp_path).execute("read_file", {"path": "anim.gif"})
    assert "first frame of 3" in output.text
    shown = decoded(base64.b64decode(output.content[1].data))
    assert shown.format == "PNG" and shown.convert("RGB").getpixel((0, 0)) == (0, 0, 0)


def test_a_broken_image_and_a_file_over_max_file_bytes_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 10)
    with pytest.raises(ToolPreconditionError, match="could not be decoded as an image"):
        router_for(tmp_path).invoke("read_file", {"path": "broken.png"})
    write(tmp_path, "big.png", picture("PNG", (400, 400), noise=True))
    with pytest.raises(ToolPreconditionError, match="over the 1000 read_file reads"):
        router_for(tmp_path, limits=ToolLimits(max_file_bytes=1000)).invoke("read_file", {"path": "big.png"})
    write(tmp_path, "broken.pdf", b"%PDF-1.7\nnot really")
    with pytest.raises(ToolPreconditionError, match="could not be opened as a PDF"):
        router_for(tmp_path).invoke("read_file", {"path": "broken.pdf"})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tail=st.binary(max_size=300), magic=st.sampled_from([b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a", b"%PDF-"])
)
def test_hostile_bytes_behind_a_media_signature_end_in_a_tool_error(tmp_path: Path, tail: bytes, magic: bytes) -> None:
    write(tmp_path, "x.bin", magic + tail)
    with contextlib.suppress(ToolError):  # refused in words; never another exception, never a hang
        router_for(tmp_path).execute("read_file", {"path": "x.bin"})


# ---- confinement, as for text -----------------------------------------------------------------


def test_an_image_outside_the_workspace_is_refused_as_text_is(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    write(outside, "secret.png", picture("PNG"))
    write(outside, "secret.txt", "secret\n")
    write(outside, "secret.pdf", PDF)
    workspace.mkdir()
    (workspace / "link.png").symlink_to(outside / "secret.png")
    (workspace / "dir").symlink_to(outside)
    router = router_for(workspace)
    for path in (str(outside / "secret.png"), "../outside/secret.png", "link.png", "dir/secret.png", "dir/secret.pdf"):
        with pytest.raises(PathDeniedError) as image_error:
            router.invoke("read_file", {"path": path})
        text_path = path.replace("secret.png", "secret.txt").replace("secret.pdf", "secret.txt")
        if path != "link.png":
            with pytest.raises(PathDeniedError) as text_error:
                router.invoke("read_file", {"path": text_path})
            assert str(image_error.value).replace("secret.png", "secret.txt").replace(
                "secret.pdf", "secret.txt"
            ) == str(text_error.value)
        result = anthropic_read(router, {"path": path})
        assert result["is_error"] is True and "outside the allowed roots" in result["content"]
        assert isinstance(result["content"], str)  # no image crossed


# ---- without the media extra ------------------------------------------------------------------


@pytest.mark.parametrize(("blocked", "name", "data"), [("PIL", "pic.png", None), ("pypdfium2", "doc.pdf", PDF)])
def test_without_the_media_extra_the_message_says_what_to_install(
    tmp_path: Path, blocked: str, name: str, data: bytes | None
) -> None:
    """A `pip install toolroute` without `[media]`: the import fails, the model and the person
    read which package is missing and the command that installs it."""
    write(tmp_path, name, data if data is not None else picture("PNG"))
    program = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from toolroute import BuiltInToolContext, ToolRouter\n"
        f"router = ToolRouter(context=BuiltInToolContext({str(tmp_path)!r}))\n"
        f"print(router.execute({'read_file'!r}, {{'path': {name!r}}}).text)\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "pip install 'toolroute[media]'" in run.stderr and "not installed" in run.stderr
