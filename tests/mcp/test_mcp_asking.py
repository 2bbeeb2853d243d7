"""What an upstream server asks during a call, through the library gateway (issue 60): the
host's `on_elicitation` / `on_sampling` callbacks answer (form elicitation, sampling), in both
protocol eras; without them the model reads a plain refusal (no SDK argument names); a -32042
keeps its code and URL; and two callers with their own askers on one shared connection each get
only their own question. Real processes: the SDK's `MCPServer` over stdio."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import mcp_types as types
import pytest
from _mcp_helpers import SERVERS

from toolroute import ToolRouter
from toolroute.asking import Asker, asking
from toolroute.errors import ToolExecutionError, UpstreamRequestError
from toolroute.mcp.gateway import McpGateway

ERAS = ["legacy", "2026-07-28"]


def config(era: str) -> dict[str, Any]:
    entry = {"command": sys.executable, "args": [str(SERVERS / "asking_server.py")], "protocol": era}
    return {"mcpServers": {"asking": entry}}


@pytest.mark.parametrize("era", ERAS)
def test_the_hosts_callbacks_answer_the_servers_questions(era: str) -> None:
    questions: list[Any] = []

    async def elicit(question: Any) -> types.ElicitResult:
        questions.append(question)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(question: Any) -> types.CreateMessageResult:
        questions.append(question)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="brief"), model="m")

    logs: list[Any] = []

    async def log(message: types.LoggingMessageNotificationParams) -> None:
        logs.append((message.level, message.data))

    with McpGateway(config(era), on_elicitation=elicit, on_sampling=sample, on_log=log) as gateway:
        router = ToolRouter(gateway=gateway)
        assert router.execute("ask_name", {"tag": "lib"}).text == "hello Ada (lib)"
        assert router.execute("summarize", {"text": "words"}).text == "summary: brief"
        assert router.execute("chatty", {"tag": "lib"}).text == "said it (lib)"
    # A handshake-era server logs during the call; a 2026-07-28 one only when asked (it is not).
    expected = [("info", "first note for lib"), ("warning", {"note": "second", "tag": "lib"})]
    assert logs == (expected if era == "legacy" else [])
    assert isinstance(questions[0], types.ElicitRequest)
    assert questions[0].params.message == "What is your name? (asked for lib)"
    assert isinstance(questions[1], types.CreateMessageRequest)


@pytest.mark.parametrize("era", ERAS)
def test_without_callbacks_the_model_reads_a_plain_refusal(era: str) -> None:
    with McpGateway(config(era)) as gateway:
        router = ToolRouter(gateway=gateway)
        with pytest.raises(ToolExecutionError) as caught:
            router.execute("ask_name", {"tag": "none"})
    text = str(caught.value)
    assert "not supported" in text.lower()
    for sdk_words in ("allow_input_required", "InputRequiredResult", "request_state"):
        assert sdk_words not in text


@pytest.mark.parametrize("era", ERAS)
def test_a_url_elicitation_error_keeps_its_code_and_url(era: str) -> None:
    with McpGateway(config(era)) as gateway:
        router = ToolRouter(gateway=gateway)
        with pytest.raises(UpstreamRequestError) as caught:
            router.execute("open_url", {"tag": "lib"})
    assert "https://auth.example/lib" in str(caught.value)
    error = caught.value.trace["mcp_error"]
    assert error["code"] == types.URL_ELICITATION_REQUIRED
    assert error["data"]["elicitations"][0]["url"] == "https://auth.example/lib"


def test_two_callers_on_one_connection_each_get_only_their_own_question() -> None:
    """Two callers, each with an asker of its own (as two served clients are), call one shared
    2026-07-28 connection at once; each answers only once both were asked, so both calls are in
    progress when the questions come."""
    asked: dict[str, list[str]] = {"alice": [], "bob": []}

    async def run(router: ToolRouter) -> dict[str, str]:
        both = asyncio.Event()

        def asker(user: str) -> Asker:
            async def ask(question: Any) -> types.ElicitResult:
                asked[user].append(question.params.message)
                if all(asked.values()):
                    both.set()
                await asyncio.wait_for(both.wait(), 60)  # only a broken gateway waits this long
                return types.ElicitResult(action="accept", content={"name": user.upper()})

            return Asker(ask, owner=user, loop=asyncio.get_running_loop())

        async def one(user: str) -> str:
            with asking(asker(user)):
                return (await router.aexecute("ask_name", {"tag": user})).text

        alice, bob = await asyncio.gather(one("alice"), one("bob"))
        return {"alice": alice, "bob": bob}

    with McpGateway(config("2026-07-28"), eager=True) as gateway:
        results = asyncio.run(run(ToolRouter(gateway=gateway)))
    assert asked == {user: [f"What is your name? (asked for {user})"] for user in ("alice", "bob")}
    assert results == {"alice": "hello ALICE (alice)", "bob": "hello BOB (bob)"}
