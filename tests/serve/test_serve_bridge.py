"""A handshake-era upstream's questions to a 2026-07-28 client, bridged (issue 60): the upstream
asks mid-call with a request of its own, the client is handed the question in its call's
`input_required` and answers by retrying; the gateway holds the upstream's call open between.
Compared with the same client connected straight to the upstream (which then asks the 2026-07-28
way itself), or with a handshake-era client where only that era can ask (a URL mid-call); two
tenants, a stolen state, a park whose call's deadline passed, a retry on another process; and the
other way, a 2026-07-28 upstream's URL to a handshake-era client. Real
processes: the SDK's client, `toolroute serve` over HTTP, the SDK's `MCPServer`."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS
from _mcp_helpers import http_server as mcp_http_server
from _serve_helpers import alice_and_bob_served, http_server
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from toolroute.serve.bridge import MAX_PARKED

ASKING = str(SERVERS / "asking_server.py")
WAIT = 60.0  # the longest a test waits for a condition (only a broken gateway reaches it)


def legacy_upstream(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [ASKING], "protocol": "legacy", **extra}


def serve_args(folder: Path, entry: dict[str, Any], *more: str) -> list[str]:
    (folder / "servers.json").write_text(json.dumps({"mcpServers": {"asking": entry}}))
    return ["--mcp-config", str(folder / "servers.json"), "--mcp-servers", "asking", *more]


@contextlib.contextmanager
def served(folder: Path, entry: dict[str, Any], *more: str) -> Iterator[str]:
    with http_server(serve_args(folder, entry, *more)) as url:
        yield url


class Answering:
    """A client's callbacks: each question recorded, answered from `script` (an action per
    question, in order: accept gives what the form asks for)."""

    def __init__(self, *script: str) -> None:
        self.script = list(script)
        self.asked: list[Any] = []

    async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        action = self.script.pop(0)
        if isinstance(params, types.ElicitRequestURLParams):
            self.asked.append(("url", params.message, params.url, params.elicitation_id))
            return types.ElicitResult(action=action)  # type: ignore[arg-type]
        self.asked.append(("form", params.message))
        fields = params.requested_schema.get("properties", {})
        content = {field: f"{field}-{len(self.asked)}" for field in fields} if action == "accept" else None
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append(("roots",))
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada/project", name="ada")])


async def run_calls(target: Any, mode: str, calls: list[tuple[str, dict[str, Any], tuple[str, ...]]]) -> list[Any]:
    """Each call with a fresh script of answers: what the client was asked, and the result."""
    outcomes: list[Any] = []
    answering = Answering()
    async with Client(
        target, mode=mode, elicitation_callback=answering.elicit, list_roots_callback=answering.roots
    ) as client:
        for tool, arguments, script in calls:
            answering.script, answering.asked = list(script), []
            try:
                result = await client.call_tool(tool, arguments)
                ended: Any = (result.is_error, [c.text for c in result.content])  # type: ignore[union-attr]
            except MCPError as exc:
                ended = ("error", exc.error.code, exc.error.message)
            outcomes.append((answering.asked, ended))
    return outcomes


TWICE = [
    ("ask_twice", {"tag": "t1"}, ("accept", "accept")),
    ("ask_twice", {"tag": "t2"}, ("decline", "accept")),
    ("ask_twice", {"tag": "t3"}, ("accept", "cancel")),
    ("where", {"tag": "t4"}, ()),
]


def test_two_questions_in_one_call_as_directly(tmp_path: Path) -> None:
    """Two questions in one call (the second asked once the first is answered) and a roots
    request: the 2026-07-28 client is asked the same and gets the same result through the
    gateway (each a round of `input_required` and a retry) as straight from the upstream."""
    direct = StdioServerParameters(command=sys.executable, args=[ASKING])
    theirs = anyio.run(run_calls, direct, "auto", TWICE)
    assert theirs[0] == (
        [("form", "What is your name? (asked for t1)"), ("form", "Your favourite colour, name-1? (asked for t1)")],
        (False, ["name-1 likes colour-2 (t1)"]),
    )
    assert theirs[1][1] == (False, ["decline likes colour-2 (t2)"])
    assert theirs[2][1] == (False, ["name-1 likes cancel (t3)"])
    assert theirs[3] == ([("roots",)], (False, ["roots of t4: file:///home/ada/project"]))
    with served(tmp_path, legacy_upstream()) as url:
        ours = anyio.run(run_calls, url, "auto", TWICE)
    assert ours == theirs


def test_a_url_asked_mid_call_reaches_a_modern_client_with_its_url(tmp_path: Path) -> None:
    """A URL elicitation a handshake-era upstream sends mid-call (only its era can): a
    2026-07-28 client through the gateway is asked for the same URL as a handshake-era client
    straight to the upstream, and the call ends the same (accept, decline); without the
    `elicitationId`, which the 2026-07-28 revision removed."""
    calls = [("visit", {"tag": "t5"}, ("accept",)), ("visit", {"tag": "t6"}, ("decline",))]
    direct = StdioServerParameters(command=sys.executable, args=[ASKING])
    theirs = anyio.run(run_calls, direct, "legacy", calls)
    assert theirs[0] == ([("url", "Sign in for t5", "https://auth.example/t5", "visit-t5")], (False, ["accept (t5)"]))
    assert theirs[1][1] == (False, ["decline (t6)"])
    with served(tmp_path, legacy_upstream()) as url:
        ours = anyio.run(run_calls, url, "auto", calls)
    assert ours == [([(*question[:3], None) for question in questions], ended) for questions, ended in theirs]


async def stepping(target: Any, mode: str) -> tuple[list[Any], list[float], Any]:
    answering = Answering("accept")
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with Client(target, mode=mode, elicitation_callback=answering.elicit) as client:
        result = await client.call_tool("steps", {"tag": "t8"}, progress_callback=on_progress)
    return answering.asked, progress, (result.is_error, [c.text for c in result.content])  # type: ignore[union-attr]


def test_progress_after_the_answer_reaches_the_retry(tmp_path: Path) -> None:
    """A bridged call's progress goes to whichever of the client's requests waits for it, under
    that request's own token: what the upstream reports after the answer reaches the retry (what
    it reports just as it asks may be lost: the request it would go to is being answered)."""
    direct = StdioServerParameters(command=sys.executable, args=[ASKING])
    theirs = anyio.run(stepping, direct, "legacy")
    question = ("form", "What is your name? (asked for t8)")
    assert theirs == ([question], [1.0, 2.0, 3.0], (False, ["name-1 stepped (t8)"]))
    with served(tmp_path, legacy_upstream()) as url:
        asked, progress, result = anyio.run(stepping, url, "auto")
    assert (asked, result) == (theirs[0], theirs[2])
    assert progress in ([1.0, 2.0, 3.0], [2.0, 3.0]), progress


def test_a_modern_upstreams_url_reaches_a_handshake_era_client(tmp_path: Path) -> None:
    """The other way: a 2026-07-28 upstream asks for a URL by its call's result; a handshake-era
    client through the gateway is asked for the same URL mid-call (with an `elicitationId` the
    gateway gives it: its revision requires one) and the call ends as for a 2026-07-28 client
    straight to the upstream."""
    calls = [("visit_later", {"tag": "t9"}, ("accept",)), ("visit_later", {"tag": "t10"}, ("decline",))]
    direct = StdioServerParameters(command=sys.executable, args=[ASKING])
    theirs = anyio.run(run_calls, direct, "auto", calls)
    assert theirs[0] == ([("url", "Sign in for t9", "https://auth.example/t9", None)], (False, ["accept (t9)"]))
    assert theirs[1][1] == (False, ["decline (t10)"])
    entry = {"command": sys.executable, "args": [ASKING], "protocol": "2026-07-28"}
    with served(tmp_path, entry) as url:
        ours = anyio.run(run_calls, url, "legacy", calls)
    ids = [question[3] for questions, _ in ours for question in questions]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 2, ids
    assert [([(*q[:3], None) for q in questions], ended) for questions, ended in ours] == theirs


def test_each_bridged_question_is_audited_with_its_answer(tmp_path: Path) -> None:
    """The question audit (one line per question, never its content) records a bridged question
    with the client's answer, which comes on its retry."""
    audit = tmp_path / "audit.jsonl"
    calls = [("ask_twice", {"tag": "t7"}, ("accept", "decline"))]
    with served(tmp_path, legacy_upstream(), "--audit-log", str(audit)) as url:
        (outcome,) = anyio.run(run_calls, url, "auto", calls)
    assert outcome[1] == (False, ["name-1 likes decline (t7)"])
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    questions = [(q["tool"], q["server"], q["question"], q["outcome"]) for q in lines if q["level"] == "question"]
    assert questions == [
        ("ask_twice", "asking", "elicitation (form)", "accept"),
        ("ask_twice", "asking", "elicitation (form)", "decline"),
    ]
    assert [line["outcome"] for line in lines if line["level"] != "question"] == ["ok"]
    assert "name-1" not in audit.read_text()


# ---- the state handed to the client: one tenant's, one process's, as long as the call lasts ----


async def never(ctx: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("the raw session hands questions back, it does not ask")


@contextlib.asynccontextmanager
async def tenant(url: str, key: str | None) -> AsyncIterator[Client]:
    """A 2026-07-28 client (of the user with API key `key`) that can answer forms, driving its
    retries itself (its raw session)."""
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode="auto", elicitation_callback=never) as client:
        yield client


def name_answer(pending: types.InputRequiredResult, name: str) -> dict[str, Any]:
    (key,) = (pending.input_requests or {}).keys()
    return {key: types.ElicitResult(action="accept", content={"name": name})}


async def asked(client: Client, tag: str) -> types.InputRequiredResult:
    pending = await client.session.call_tool("ask_name", {"tag": tag}, allow_input_required=True)
    assert isinstance(pending, types.InputRequiredResult) and pending.request_state, pending
    (question,) = (pending.input_requests or {}).values()
    assert isinstance(question, types.ElicitRequest) and question.params.message.endswith(f"(asked for {tag})")
    return pending


async def answered(client: Client, tag: str, pending: types.InputRequiredResult, name: str) -> Any:
    return await client.session.call_tool(
        "ask_name",
        {"tag": tag},
        input_responses=name_answer(pending, name),
        request_state=pending.request_state,
        allow_input_required=True,
    )


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult), result
    return result.content[0].text  # type: ignore[union-attr]


def test_another_tenant_cannot_answer_with_a_stolen_state() -> None:
    """bob, handed alice's parked question's state, is refused as if it were unknown, and his
    answer never reaches the upstream: alice then answers it herself, and gets her result."""

    def upstreams(folder: Path) -> list[str]:
        return serve_args(folder, legacy_upstream())

    async def go(url: str, keys: dict[str, str]) -> tuple[MCPError, str]:
        async with tenant(url, keys["alice"]) as alice, tenant(url, keys["bob"]) as bob:
            pending = await asked(alice, "alice")
            with pytest.raises(MCPError) as refused:
                await answered(bob, "alice", pending, "MALLORY")
            return refused.value, text_of(await answered(alice, "alice", pending, "ALICE"))

    with alice_and_bob_served(upstreams) as (url, keys):
        refused, result = anyio.run(go, url, keys)
    assert refused.error.code == types.INVALID_PARAMS and "request_state" in refused.error.message
    assert "no call waiting" in refused.error.message
    assert result == "hello ALICE (alice)"


def wait_for_line(path: Path, wanted: dict[str, Any]) -> None:
    """Until the audit log at `path` has a line with the `wanted` fields (bounded by WAIT)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                if all(entry.get(k) == v for k, v in wanted.items()):
                    return
        time.sleep(0.1)
    pytest.fail(f"no audit line with {wanted}: {path.read_text() if path.exists() else '(no log)'}")


def test_a_retry_after_the_calls_deadline_is_refused(tmp_path: Path) -> None:
    """A parked call lasts no longer than its call: once the call's deadline (the upstream's
    `timeout`) has passed, its question is cancelled (audited so) and the retry answering it is
    refused with a message that says why; a replay of an answered state is refused alike."""
    audit = tmp_path / "audit.jsonl"
    entry = legacy_upstream(timeout=5)

    async def first(url: str) -> types.InputRequiredResult:
        async with tenant(url, None) as client:
            await client.list_tools()  # the upstream started before the call's deadline runs
            return await asked(client, "late")

    async def retry(url: str, pending: types.InputRequiredResult) -> MCPError:
        async with tenant(url, None) as client:
            with pytest.raises(MCPError) as refused:
                await answered(client, "late", pending, "Ada")
            return refused.value

    async def replay(url: str) -> tuple[str, MCPError]:
        async with tenant(url, None) as client:
            pending = await asked(client, "again")
            result = text_of(await answered(client, "again", pending, "Ada"))
            with pytest.raises(MCPError) as refused:
                await answered(client, "again", pending, "Ada")
            return result, refused.value

    with served(tmp_path, entry, "--audit-log", str(audit)) as url:
        pending = anyio.run(first, url)
        wait_for_line(audit, {"level": "question", "tool": "ask_name", "outcome": "cancelled"})
        late = anyio.run(retry, url, pending)
        result, replayed = anyio.run(replay, url)
    assert late.error.code == types.INVALID_PARAMS
    assert "its call has ended" in late.error.message and "sticky routing" in late.error.message
    assert result == "hello Ada (again)"
    assert replayed.error.code == types.INVALID_PARAMS and "no call waiting" in replayed.error.message


def test_a_retry_on_another_process_is_refused(tmp_path: Path) -> None:
    """Parks are one process's: a retry that reaches another replica is refused, saying that
    replicas need sticky routing; the process that parked it still takes the answer."""

    async def go(first: str, other: str) -> tuple[MCPError, str]:
        async with tenant(first, None) as here, tenant(other, None) as there:
            pending = await asked(here, "sticky")
            with pytest.raises(MCPError) as refused:
                await answered(there, "sticky", pending, "Ada")
            return refused.value, text_of(await answered(here, "sticky", pending, "Ada"))

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with served(tmp_path / "a", legacy_upstream()) as first, served(tmp_path / "b", legacy_upstream()) as other:
        refused, result = anyio.run(go, first, other)
    assert refused.error.code == types.INVALID_PARAMS and "sticky routing" in refused.error.message
    assert result == "hello Ada (sticky)"


def test_a_caller_parks_only_so_many_calls(tmp_path: Path) -> None:
    """One caller's parked calls are bounded: past MAX_PARKED, a further call's question is
    refused to the upstream (its call ends as the upstream ends it), not parked; once one parked
    call is answered, the next question parks again. (A handshake-era upstream over HTTP: each
    question is exactly its own call's, however many are in progress.)"""

    async def go(url: str) -> tuple[Any, str, str]:
        async with tenant(url, None) as client:
            pending = [await asked(client, f"p{n}") for n in range(MAX_PARKED)]
            over = await client.session.call_tool("ask_name", {"tag": "over"}, allow_input_required=True)
            first = text_of(await answered(client, "p0", pending[0], "Ada"))
            again = await asked(client, "again")
            return over, first, text_of(await answered(client, "again", again, "Bo"))

    with (
        mcp_http_server(script="asking_server.py") as web,
        served(tmp_path, {"url": web.url, "protocol": "legacy"}) as url,
    ):
        over, first, again = anyio.run(go, url)
    assert isinstance(over, types.CallToolResult) and over.is_error, over
    assert "too many questions" in text_of(over), over
    assert first == "hello Ada (p0)"
    assert again == "hello Bo (again)"
