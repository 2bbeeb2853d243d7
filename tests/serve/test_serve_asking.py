"""What an upstream server asks during a call passes through the gateway (issue 60): a form
elicitation, a -32042 URL elicitation and sampling from an upstream built on the `mcp` SDK reach
the SDK client that made the call, and its answer, decline or cancel goes back; compared with the
same client connected straight to the upstream, over stdio and HTTP, with the upstream in either
protocol era. Real processes: the SDK's client, `toolroute serve`, the SDK's `MCPServer`."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS
from _mcp_helpers import http_server as mcp_http_server
from _serve_helpers import alice_and_bob_served, http_server, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

ASKING = str(SERVERS / "asking_server.py")
UPSTREAM_ERAS = ["legacy", "2026-07-28"]
Outcome = tuple[list[Any], Any]  # (what the client was asked, what the call ended with)


def upstream(era: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [ASKING], "protocol": era}


def serve_args(tmp_path: Path, era: str) -> list[str]:
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"asking": upstream(era)}}))
    return ["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "asking"]


def direct() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[ASKING])


def served_stdio(args: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())


class Answering:
    """Callbacks that record each question and give `action` (accept with a name, decline, cancel)."""

    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.action = "accept"

    async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(("elicit", params.message))
        content = {"name": "Ada"} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]

    async def sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        text = params.messages[0].content.text  # type: ignore[union-attr]
        self.asked.append(("sample", text))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="short"), model="m")


async def call(client: Client, answering: Answering, tool: str, arguments: dict[str, Any], action: str) -> Outcome:
    answering.action, answering.asked = action, []
    (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith(tool)]
    try:
        result = await client.call_tool(name, arguments)
    except MCPError as exc:
        return answering.asked, ("error", exc.error.code, exc.error.data)
    return answering.asked, (result.is_error, [c.text for c in result.content])  # type: ignore[union-attr]


async def all_cases(target: Any, mode: str = "legacy") -> list[Outcome]:
    answering = Answering()
    async with Client(
        target, mode=mode, elicitation_callback=answering.elicit, sampling_callback=answering.sample
    ) as client:
        return [await call(client, answering, tool, arguments, action) for tool, arguments, action in CASES]


CASES = [
    ("ask_name", {"tag": "t1"}, "accept"),
    ("ask_name", {"tag": "t2"}, "decline"),
    ("ask_name", {"tag": "t3"}, "cancel"),
    ("summarize", {"text": "a long text"}, "accept"),
    ("open_url", {"tag": "t4"}, "accept"),
]


# (client era, upstream era): a handshake-era client is asked mid-call, by the gateway, whatever
# the upstream's era; a 2026-07-28 client gets a 2026-07-28 upstream's `input_required` itself,
# and a handshake-era upstream's questions bridged into `input_required` (serve/bridge.py).
PAIRS = [("legacy", "legacy"), ("legacy", "2026-07-28"), ("auto", "2026-07-28"), ("auto", "legacy")]


@pytest.mark.parametrize(("client_era", "era"), PAIRS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_questions_pass_through_as_they_would_directly(
    tmp_path: Path, transport: str, client_era: str, era: str
) -> None:
    """The same questions, the same answers, the same results as with no gateway between."""
    args = serve_args(tmp_path, era)
    theirs = anyio.run(all_cases, direct(), client_era)
    assert theirs[0] == ([("elicit", "What is your name? (asked for t1)")], (False, ["hello Ada (t1)"]))
    assert theirs[1][1] == (False, ["decline (t2)"]) and theirs[2][1] == (False, ["cancel (t3)"])
    assert theirs[3] == ([("sample", "Summarize: a long text")], (False, ["summary: short"]))
    assert theirs[4][1][:2] == ("error", types.URL_ELICITATION_REQUIRED)
    if transport == "stdio":
        ours = anyio.run(all_cases, served_stdio(args), client_era)
    else:
        with http_server(args) as url:
            ours = anyio.run(all_cases, url, client_era)
    assert ours == theirs


async def chatty(target: Any) -> tuple[list[Any], str]:
    logs: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.data))

    async with Client(target, mode="legacy", logging_callback=on_log) as client:
        (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("chatty")]
        result = await client.call_tool(name, {"tag": "t6"})
        return logs, result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_calls_log_messages_reach_its_client(tmp_path: Path, transport: str) -> None:
    """A handshake-era upstream's `notifications/message` during a call reach the client of the
    call, before its result (a 2026-07-28 upstream sends none unasked, directly or not)."""
    args = serve_args(tmp_path, "legacy")
    theirs = anyio.run(chatty, direct())
    assert theirs == ([("info", "first note for t6"), ("warning", {"note": "second", "tag": "t6"})], "said it (t6)")
    if transport == "stdio":
        ours = anyio.run(chatty, served_stdio(args))
    else:
        with http_server(args) as url:
            ours = anyio.run(chatty, url)
    assert ours == theirs


# ---- two clients on one shared upstream ---------------------------------------------------


@contextlib.contextmanager
def one_upstream_two_clients(entry: dict[str, Any], tmp_path: Path) -> Iterator[str]:
    """`toolroute serve` over stateful HTTP serving the one upstream `entry` (one connection,
    shared by every client); yields the URL. (With auth, served HTTP is stateless: a handshake-era
    client cannot be asked mid-call there, see docs/mcp.md.)"""
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"asking": entry}}))
    with http_server(["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "asking"]) as url:
        yield url


async def client_call(url: str, answering: Any, tag: str) -> Any:
    async with Client(url, mode="legacy", elicitation_callback=answering) as client:
        (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("ask_name")]
        result = await client.call_tool(name, {"tag": tag})
        return result.content[0].text  # type: ignore[union-attr]


def both_at_once(url: str, rendezvous: bool) -> tuple[dict[str, list[str]], dict[str, str]]:
    """alice and bob call `ask_name` at once, each tagged with their name. With `rendezvous`, each
    client answers only once both were asked, so both calls are in progress together when the
    questions arrive (a question routed to the latest or any call would reach the wrong one)."""
    asked: dict[str, list[str]] = {"alice": [], "bob": []}
    results: dict[str, str] = {}

    async def go() -> None:
        both_asked = anyio.Event()

        def answering(user: str) -> Any:
            async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                asked[user].append(params.message)
                if rendezvous:
                    if all(asked.values()):
                        both_asked.set()
                    with anyio.fail_after(60):  # only a broken gateway waits this long
                        await both_asked.wait()
                return types.ElicitResult(action="accept", content={"name": user.upper()})

            return elicit

        async def one(user: str) -> None:
            results[user] = await client_call(url, answering(user), user)

        async with anyio.create_task_group() as tasks:
            for user in ("alice", "bob"):
                tasks.start_soon(one, user)

    anyio.run(go)
    return asked, results


@pytest.mark.parametrize("where", ["2026-07-28 over stdio", "legacy over http"])
def test_each_client_gets_only_its_own_question(where: str, tmp_path: Path) -> None:
    """Two clients (alice, bob) call one shared upstream at once: its question reaches the client
    whose call caused it, and only it: from a
    2026-07-28 upstream the question is part of the call's own result; from a handshake-era
    upstream over HTTP it comes on the call's own response stream."""
    if where.startswith("legacy"):
        with mcp_http_server(script="asking_server.py") as web:
            entry = {"url": web.url, "protocol": "legacy"}
            with one_upstream_two_clients(entry, tmp_path) as url:
                asked, results = both_at_once(url, rendezvous=True)
    else:
        with one_upstream_two_clients(upstream("2026-07-28"), tmp_path) as url:
            asked, results = both_at_once(url, rendezvous=True)
    assert asked == {user: [f"What is your name? (asked for {user})"] for user in ("alice", "bob")}, results
    assert results == {"alice": "hello ALICE (alice)", "bob": "hello BOB (bob)"}


def test_a_question_that_cannot_be_placed_goes_to_no_client(tmp_path: Path) -> None:
    """A handshake-era upstream over stdio says nothing of which call asks: while two tenants'
    calls are in progress together, a question is refused rather than guessed; a client sees
    its own question or none, never the other's (several rounds, bounded)."""
    with one_upstream_two_clients(upstream("legacy"), tmp_path) as url:
        for _ in range(3):
            asked, results = both_at_once(url, rendezvous=False)
            for user in ("alice", "bob"):
                assert asked[user] in ([], [f"What is your name? (asked for {user})"])
                if asked[user]:
                    assert results[user] == f"hello {user.upper()} ({user})"
                else:
                    assert "not supported" in results[user].lower(), results[user]


# ---- two tenants (served mode with API keys: stateless HTTP, 2026-07-28 clients) -----------


def two_tenants(entry: dict[str, Any]) -> contextlib.AbstractContextManager[tuple[str, dict[str, str]]]:
    """`toolroute serve` over HTTP with API keys for alice and bob, both served the one global
    upstream `entry` (one connection, shared); yields the URL and each user's key."""

    def upstream(folder: Path) -> list[str]:
        (folder / "servers.json").write_text(json.dumps({"mcpServers": {"asking": entry}}))
        return ["--mcp-config", str(folder / "servers.json"), "--mcp-servers", "asking"]

    return alice_and_bob_served(upstream)


@contextlib.asynccontextmanager
async def tenant(url: str, key: str, elicit: Any = None) -> AsyncIterator[tuple[Client, str]]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode="auto", elicitation_callback=elicit) as client:
        (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("ask_name")]
        yield client, name


def test_each_tenant_gets_only_its_own_question_and_cannot_answer_anothers() -> None:
    """alice and bob call the shared 2026-07-28 upstream at once: each is asked only its own
    question and gets its own result; then bob, handed alice's `input_required` state, is
    refused with it (the state is sealed to the user and tool it was issued for)."""
    asked: dict[str, list[str]] = {"alice": [], "bob": []}
    results: dict[str, str] = {}

    async def go(url: str, keys: dict[str, str]) -> Any:
        both_asked = anyio.Event()

        def answering(user: str) -> Any:
            async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                asked[user].append(params.message)
                if all(asked.values()):
                    both_asked.set()
                with anyio.fail_after(60):  # only a broken gateway waits this long
                    await both_asked.wait()
                return types.ElicitResult(action="accept", content={"name": user.upper()})

            return elicit

        async def one(user: str) -> None:
            async with tenant(url, keys[user], answering(user)) as (client, name):
                result = await client.call_tool(name, {"tag": user})
                results[user] = result.content[0].text  # type: ignore[union-attr]

        async with anyio.create_task_group() as tasks:
            for user in ("alice", "bob"):
                tasks.start_soon(one, user)

        async def never(ctx: Any, params: Any) -> types.ElicitResult:
            raise AssertionError("the raw session hands questions back, it does not ask")

        async with tenant(url, keys["alice"], never) as (alice, name):
            pending = await alice.session.call_tool(name, {"tag": "alice"}, allow_input_required=True)
        assert isinstance(pending, types.InputRequiredResult) and pending.request_state
        (key,) = (pending.input_requests or {}).keys()
        answer = {key: types.ElicitResult(action="accept", content={"name": "MALLORY"})}
        async with tenant(url, keys["bob"], never) as (bob, name):
            with pytest.raises(MCPError) as refused:
                await bob.session.call_tool(
                    name, {"tag": "alice"}, input_responses=answer, request_state=pending.request_state
                )
        return refused.value.error

    with two_tenants(upstream("2026-07-28")) as (url, keys):
        error = anyio.run(go, url, keys)
    assert asked == {user: [f"What is your name? (asked for {user})"] for user in ("alice", "bob")}
    assert results == {"alice": "hello ALICE (alice)", "bob": "hello BOB (bob)"}
    assert error.code == types.INVALID_PARAMS and "request_state" in error.message
