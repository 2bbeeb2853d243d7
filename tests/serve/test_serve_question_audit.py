"""One audit line per question an upstream puts to a served client during a call (issue 60):
who, which upstream server, which tool, what kind, how it ended; never the question or the
answer. `toolroute serve` over HTTP with `--audit-log`, the SDK's client and `MCPServer`
(`asking_server.py`), the upstream in either era."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS
from _serve_helpers import http_server
from mcp import Client
from mcp.shared.exceptions import MCPError

ASKING = str(SERVERS / "asking_server.py")


async def session(url: str, mode: str) -> None:
    actions = iter(["accept", "decline"])

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        action = next(actions)
        return types.ElicitResult(action=action, content={"name": "Ada"} if action == "accept" else None)  # type: ignore[arg-type]

    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="secret summary"), model="m")

    async with Client(url, mode=mode, elicitation_callback=elicit, sampling_callback=sample) as client:
        await client.call_tool("ask_name", {"tag": "t1"})
        await client.call_tool("ask_name", {"tag": "t2"})
        await client.call_tool("summarize", {"text": "private words"})
        # No roots declared: refused, as the upstream's error or an error result.
        with contextlib.suppress(MCPError):
            assert (await client.call_tool("where", {"tag": "t3"})).is_error


def question_lines(audit: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    return [line for line in lines if line["level"] == "question"]


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_each_question_leaves_one_line_without_its_content(tmp_path: Path, era: str) -> None:
    entry = {"command": sys.executable, "args": [ASKING], "protocol": era}
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"asking": entry}}))
    audit = tmp_path / "audit.jsonl"
    args = ["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "asking", "--audit-log", str(audit)]
    with http_server(args) as url:
        anyio.run(session, url, "legacy")
    seen = [(q["tool"], q["server"], q["question"], q["outcome"]) for q in question_lines(audit)]
    assert seen == [
        ("ask_name", "asking", "elicitation (form)", "accept"),
        ("ask_name", "asking", "elicitation (form)", "decline"),
        ("summarize", "asking", "sampling", "answered"),
        ("where", "asking", "roots", "refused"),
    ]
    text = audit.read_text()
    for secret in ("Ada", "What is your name", "secret summary", "private words"):
        assert secret not in text


def test_a_modern_clients_questions_are_audited_as_passed_back(tmp_path: Path) -> None:
    """A 2026-07-28 client of a 2026-07-28 upstream is handed the questions in the call's result
    (`input_required`): one line each when handed, then its retry is answered."""
    entry = {"command": sys.executable, "args": [ASKING], "protocol": "2026-07-28"}
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"asking": entry}}))
    audit = tmp_path / "audit.jsonl"
    args = ["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "asking", "--audit-log", str(audit)]

    async def go(url: str) -> str:
        async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            return types.ElicitResult(action="accept", content={"name": "Ada"})

        async with Client(url, mode="auto", elicitation_callback=elicit) as client:
            result = await client.call_tool("ask_name", {"tag": "t1"})
            return result.content[0].text  # type: ignore[union-attr]

    with http_server(args) as url:
        assert anyio.run(go, url) == "hello Ada (t1)"
    seen = [(q["tool"], q["server"], q["question"], q["outcome"]) for q in question_lines(audit)]
    assert seen == [("ask_name", "asking", "elicitation (form)", "input_required")]
    assert "Ada" not in audit.read_text()
