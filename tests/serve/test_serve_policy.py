"""An operator's policy through a real `toolroute serve --policy FILE` (issue 59): JWT users and
API-key users (their registry attributes as claims) see different tools; an argument rule
refuses one path and not another; approve holds a call; overrides reach the client and the
upstream server; rule ids in the audit; the file reloaded when it changes, a broken one kept
out (and refused at startup, naming line and column).

The clients are the `mcp` SDK's own, on 127.0.0.1; the upstream is a real stdio MCP server.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jwt
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS, script_stdio
from _serve_helpers import (
    TOOLS_MODULE,
    ServedProcess,
    http_server,
    outside_tmp,
    run_cli,
    served_http,
    tool_env,
    toolroute_exe,
)
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from toolroute.serve.store import UserStore

ISSUER = "https://issuer.test"
AUDIENCE = "toolroute-test"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)

POLICY = """\
default: allow
rules:
  - id: bash-admins-only
    when: tool.name == "bash" && !("admin" in user.claims.roles)
    effect: deny
    reason: bash is for admins
  - id: no-secrets
    when: tool.name in ["read_file", "write_file"] && args.path.startsWith("secrets/")
    effect: deny
    reason: "Secrets stay put: ask the security team."
  - id: prod-needs-a-person
    when: tool.server == "args" && args.service == "prod"
    effect: approve
  - id: held-writes
    when: tool.name == "write_file" && args.path.startsWith("held/")
    effect: approve
    reason: Writes under held/ wait for a person.
tools:
  deploy:
    name: ship
    description: Ship a service to its region.
    fixed: {dry_run: false}
    hidden: [token]
"""


def token(sub: str, **claims: Any) -> str:
    body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 600, **claims}
    return jwt.encode(body, KEY, algorithm="RS256", headers={"kid": "k1"})


@dataclass
class Served:
    server: ServedProcess
    folder: Path
    policy: Path
    audit: Path
    dora_key: str  # an API key whose user's registry attributes make her an admin
    erin_key: str  # an API key whose user has no attributes


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    tmp = outside_tmp()
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _serve_args(tmp: Path, store_url: str) -> list[str]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    (tmp / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    (tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"args": script_stdio("args_server.py")}}))
    return [
        *("--modules", TOOLS_MODULE, "--functions", "bash,read_file,write_file,echo,run_code", "--sandbox", "on"),
        *("--mcp-config", str(tmp / "mcp.json"), "--mcp-servers", "args"),
        *("--auth-jwks", str(tmp / "jwks.json"), "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE),
        *("--api-keys", "--store", store_url, "--workspace-template", str(tmp / "ws" / "{user}")),
        *("--audit-log", str(tmp / "audit.jsonl"), "--policy", str(tmp / "policy.yaml")),
    ]


@pytest.fixture(scope="module")
def served(folder: Path) -> Iterator[Served]:
    store_url = f"sqlite:///{folder / 'users.db'}"
    with UserStore(store_url) as store:
        for user in ("alice", "bob", "dora", "erin"):
            store.add_user(user)
        dora, erin = store.add_key("dora"), store.add_key("erin")
    # The operator's door to a user's attributes (what an API-key user's `user.claims` are).
    set_roles = run_cli("users", "--store", store_url, "attributes", "dora", "--set", '{"roles": ["admin"]}')
    assert set_roles.returncode == 0 and json.loads(set_roles.stdout) == {"roles": ["admin"]}
    assert run_cli("users", "--store", store_url, "attributes", "erin").stdout.strip() == "{}"
    (folder / "policy.yaml").write_text(POLICY)
    with served_http(_serve_args(folder, store_url)) as server:
        yield Served(server, folder, folder / "policy.yaml", folder / "audit.jsonl", dora, erin)


async def _session(url: str, bearer: str, work: Any) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        return await work(client)


def listing(served: Served, bearer: str) -> dict[str, Any]:
    async def work(client: Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    result: dict[str, Any] = anyio.run(_session, served.server.url, bearer, work)
    return result


def call(served: Served, bearer: str, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    async def work(client: Client) -> tuple[bool, str]:
        result = await client.call_tool(name, arguments)
        return bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)

    answer: tuple[bool, str] = anyio.run(_session, served.server.url, bearer, work)
    return answer


def audit_lines(served: Served) -> list[dict[str, Any]]:
    return [json.loads(line) for line in served.audit.read_text().splitlines()]


def test_admins_see_bash_and_others_do_not_by_jwt_claims_or_registry_attributes(served: Served) -> None:
    assert "bash" in listing(served, token("alice", roles=["admin"]))
    assert "bash" not in listing(served, token("bob", roles=["dev"]))
    assert "bash" not in listing(served, token("bob"))  # no roles claim: the deny rule holds
    assert "bash" in listing(served, served.dora_key)
    erin = listing(served, served.erin_key)
    assert "bash" not in erin and "read_file" in erin
    # Calling it anyway: refused as a tool this server does not serve, and nothing ran.
    failed, text = call(served, token("bob", roles=["dev"]), "bash", {"command": "echo ran > proof"})
    assert failed and "not served" in text
    assert not (served.folder / "ws" / "bob" / "proof").exists()
    # The audit says which rule hid it; a name nobody serves has no rule.
    line = [r for r in audit_lines(served) if r["user"] == "bob"][-1]
    assert line["tool"] == "bash" and line["outcome"] == "refused" and line["policy"] == ["bash-admins-only"]
    failed, text = call(served, token("bob", roles=["dev"]), "no_such_tool", {})
    assert failed and "not served" in text
    line = [r for r in audit_lines(served) if r["user"] == "bob"][-1]
    assert line["tool"] == "no_such_tool" and line["policy"] is None


def test_a_programs_call_of_a_hidden_tool_is_audited_with_the_rule_that_hides_it(served: Served) -> None:
    lines = ["import tools", "try:", '    tools.call("bash", command="echo ran > proof")']
    program = "\n".join([*lines, "except tools.ToolError as e:", "    print(e.kind)", ""])
    failed, text = call(served, token("bob", roles=["dev"]), "run_code", {"code": program})
    assert not failed and text.strip() == "not_found", text
    assert not (served.folder / "ws" / "bob" / "proof").exists()
    inner = [r for r in audit_lines(served) if r["user"] == "bob" and r["caller"] == "run_code"][-1]
    assert inner["tool"] == "bash" and inner["outcome"] == "refused" and inner["policy"] == ["bash-admins-only"]


def test_the_same_user_with_new_claims_gets_the_new_view(served: Served) -> None:
    assert "bash" not in listing(served, token("alice", roles=["dev"]))
    assert "bash" in listing(served, token("alice", roles=["admin"]))
    assert "bash" not in listing(served, token("alice", roles=["dev"]))


def test_an_argument_rule_refuses_one_path_and_not_another(served: Served) -> None:
    bob = token("bob", roles=["dev"])
    failed, text = call(served, bob, "write_file", {"path": "secrets/key.txt", "content": "hunter2"})
    assert failed and text == "Secrets stay put: ask the security team."
    assert not (served.folder / "ws" / "bob" / "secrets").exists()
    assert call(served, bob, "write_file", {"path": "notes.txt", "content": "public"})[0] is False
    failed, text = call(served, bob, "read_file", {"path": "notes.txt"})
    assert not failed and "public" in text
    lines = [r for r in audit_lines(served) if r["user"] == "bob" and r["tool"] == "write_file"]
    assert lines[-2]["policy"] == ["no-secrets"] and lines[-2]["outcome"] == "refused"
    assert lines[-1]["policy"] == ["default"] and lines[-1]["outcome"] == "ok"


def test_overrides_reach_the_client_and_the_upstream(served: Served) -> None:
    bob = token("bob", roles=["dev"])
    tools = listing(served, bob)
    assert "deploy" not in tools
    ship = tools["ship"]
    assert ship.description == "Ship a service to its region."
    assert set(ship.input_schema["properties"]) == {"service", "region"}
    # The client tries to set the fixed argument and to slip the hidden one through.
    failed, text = call(served, bob, "ship", {"service": "web", "dry_run": True, "token": "stolen"})
    assert not failed, text
    assert json.loads(text) == {"service": "web", "region": "eu", "token": "<unset>", "dry_run": False}
    failed, text = call(served, bob, "deploy", {"service": "web"})
    assert failed and "not served" in text


def test_approve_holds_the_call_of_a_client_that_cannot_be_asked(served: Served) -> None:
    """Without an elicitation callback the client declares no elicitation: it is refused, and why."""
    failed, text = call(served, token("bob", roles=["dev"]), "ship", {"service": "prod"})
    assert failed and "needs a person's approval" in text and "prod-needs-a-person" in text
    assert "dry_run" not in text  # the upstream never answered
    line = [r for r in audit_lines(served) if r["tool"] == "ship"][-1]
    assert line["policy"] == ["prod-needs-a-person"] and line["outcome"] == "refused"
    assert line["approval"] == "unasked"


class Answering:
    """An elicitation callback that records each question and gives `action`."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.asked: list[str] = []

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        assert params.mode == "form" and params.requested_schema == {"type": "object", "properties": {}}
        return types.ElicitResult(action=self.action, content={} if self.action == "accept" else None)  # type: ignore[arg-type]


def asked_call(
    served: Served, bearer: str, name: str, arguments: dict[str, Any], answering: Answering, mode: str = "auto"
) -> tuple[bool, str]:
    async def go() -> tuple[bool, str]:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"})
        transport = streamable_http_client(served.server.url, http_client=http)
        async with http, Client(transport, mode=mode, elicitation_callback=answering) as client:  # type: ignore[arg-type]
            result = await client.call_tool(name, arguments)
            return bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)

    answer: tuple[bool, str] = anyio.run(go)
    return answer


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_approve_asks_the_client_and_runs_only_what_it_accepts(served: Served, action: str) -> None:
    """A 2026-07-28 client is asked by the call's `input_required` result; its retry carries the
    answer. Accepted, the write happens; declined or cancelled, nothing runs."""
    answering = Answering(action)
    path = f"held/{action}.txt"
    failed, text = asked_call(
        served, token("bob", roles=["dev"]), "write_file", {"path": path, "content": "x"}, answering
    )
    assert answering.asked == ["Allow the call to 'write_file'? Writes under held/ wait for a person."]
    written = served.folder / "ws" / "bob" / path
    lines = [r for r in audit_lines(served) if r["user"] == "bob" and r["tool"] == "write_file"][-2:]
    assert lines[0]["outcome"] == "input_required" and lines[0]["approval"] == "asked"
    assert lines[0]["policy"] == ["held-writes"] and lines[1]["policy"] == ["held-writes"]
    assert lines[1]["approval"] == action
    if action == "accept":
        assert not failed, text
        assert written.read_text() == "x" and lines[1]["outcome"] == "ok"
    else:
        assert failed and text.endswith(f"(the user answered {action}): Writes under held/ wait for a person.")
        assert not written.exists() and lines[1]["outcome"] == "refused"


def test_an_approved_upstream_call_gets_the_overrides(served: Served) -> None:
    answering = Answering("accept")
    failed, text = asked_call(served, token("bob", roles=["dev"]), "ship", {"service": "prod", "token": "t"}, answering)
    assert not failed and json.loads(text) == {"service": "prod", "region": "eu", "token": "<unset>", "dry_run": False}
    assert len(answering.asked) == 1 and "prod-needs-a-person" in answering.asked[0]


def test_a_handshake_era_client_on_stateless_http_cannot_be_asked(served: Served) -> None:
    """Served HTTP with auth keeps no channel to ask a handshake-era client on: refused, unasked."""
    answering = Answering("accept")
    bob = token("bob", roles=["dev"])
    failed, text = asked_call(
        served, bob, "write_file", {"path": "held/legacy.txt", "content": "x"}, answering, "legacy"
    )
    assert failed and "needs a person's approval" in text and answering.asked == []
    assert not (served.folder / "ws" / "bob" / "held" / "legacy.txt").exists()


def _forged(state: str, **changes: Any) -> str:
    """`state` with its sealed payload changed and its seal kept (what a client could try)."""
    prefix, body, mac = state.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"{prefix}.{forged}.{mac}"


def test_an_approval_is_the_callers_own_for_that_very_call(served: Served) -> None:
    """The question's state is sealed to its user, tool and arguments: another tenant answering it,
    other arguments, a forged seal or a forged grant are refused, and nothing runs."""
    alice, bob = token("alice", roles=["dev"]), token("bob", roles=["dev"])
    arguments = {"path": "held/alice.txt", "content": "alice's"}

    async def never(ctx: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("the raw session hands questions back, it does not ask")

    async def with_session(bearer: str, work: Any) -> Any:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"})
        transport = streamable_http_client(served.server.url, http_client=http)
        async with http, Client(transport, elicitation_callback=never) as client:  # it declares elicitation
            return await work(client.session)

    async def pending(session: Any) -> Any:
        return await session.call_tool("write_file", arguments, allow_input_required=True)

    held = anyio.run(with_session, alice, pending)
    assert isinstance(held, types.InputRequiredResult) and held.request_state
    (key,) = (held.input_requests or {}).keys()
    yes = {key: types.ElicitResult(action="accept", content={})}

    def retry(bearer: str, args: dict[str, Any], state: str, answers: Any = yes) -> Any:
        async def work(session: Any) -> Any:
            try:
                return await session.call_tool("write_file", args, input_responses=answers, request_state=state)
            except MCPError as exc:
                return exc.error

        return anyio.run(with_session, bearer, work)

    state = held.request_state
    refusals = [
        retry(bob, arguments, state),  # another tenant answering alice's question
        retry(alice, {**arguments, "path": "held/other.txt"}, state),  # the approval of other arguments
        retry(alice, arguments, state[:-4] + "0000"),  # a forged seal
        retry(alice, arguments, _forged(state, granted=True)),  # a forged grant under the old seal
        retry(alice, arguments, _forged(state, who="user:bob")),
    ]
    for error in refusals:
        assert isinstance(error, types.ErrorData), error
        assert error.code == types.INVALID_PARAMS and "request_state" in error.message
    assert not (served.folder / "ws" / "alice" / "held").exists()
    assert not (served.folder / "ws" / "bob" / "held" / "alice.txt").exists()
    # A retry without an answer is a cancel; the state is spent then, as after any answer.
    unanswered = retry(alice, arguments, state, None)
    assert unanswered.is_error and "(the user answered cancel)" in unanswered.content[0].text
    spent = retry(alice, arguments, state)
    assert isinstance(spent, types.ErrorData) and spent.code == types.INVALID_PARAMS
    assert not (served.folder / "ws" / "alice" / "held").exists()
    # Asked again, alice's own accepted answer runs the call, once: a replay of it is refused.
    state = anyio.run(with_session, alice, pending).request_state
    done = retry(alice, arguments, state)
    assert not done.is_error and (served.folder / "ws" / "alice" / "held" / "alice.txt").read_text() == "alice's"
    replayed = retry(alice, arguments, state)
    assert isinstance(replayed, types.ErrorData) and replayed.code == types.INVALID_PARAMS


def test_a_changed_file_applies_to_the_next_request_and_a_broken_one_is_kept_out(served: Served) -> None:
    bob = token("bob", roles=["dev"])
    assert "echo" in listing(served, bob)
    extra = '  - id: no-echo\n    when: tool.name == "echo"\n    effect: deny\n'
    served.policy.write_text(POLICY.replace("rules:\n", "rules:\n" + extra))
    assert "echo" not in listing(served, bob)
    failed, text = call(served, bob, "echo", {"text": "hi"})
    assert failed and "not served" in text
    # A broken file: the policy in force stays, and the server says why.
    served.policy.write_text(POLICY.replace("rules:\n", "rules:\n" + extra).replace('"echo"', '"echo" &&'))
    names = listing(served, bob)
    assert "echo" not in names and "bash" not in names and "ship" in names
    served.server.wait_for("policy file changed but is not used")
    assert "policy.yaml:" in served.server.drain()
    # Mended: the file as it first was applies again.
    served.policy.write_text(POLICY)
    assert "echo" in listing(served, bob)


def test_a_broken_file_refuses_to_start_naming_line_and_column(folder: Path) -> None:
    broken = folder / "broken.yaml"
    broken.write_text('default: allow\nrules:\n  - id: a\n    when: "tool.name =="\n    effect: deny\n')
    result = run_cli("serve", "--transport", "http", "--port", "0", "--functions", "read_file", "--policy", str(broken))
    assert result.returncode != 0
    assert f"{broken}:4:11" in result.stderr and "not valid CEL" in result.stderr
    broken.write_text("default: sometimes\n")
    result = run_cli("serve", "--transport", "http", "--port", "0", "--functions", "read_file", "--policy", str(broken))
    assert result.returncode != 0 and f"{broken}:1:10" in result.stderr


def test_a_stdio_server_applies_the_policy_to_its_one_caller(folder: Path) -> None:
    policy = folder / "stdio.yaml"
    policy.write_text(POLICY)  # no claims on stdio: the bash rule denies; the argument rule holds
    (folder / "stdio-ws").mkdir(exist_ok=True)
    params = StdioServerParameters(
        command=toolroute_exe(),
        args=[
            *("serve", "--modules", TOOLS_MODULE, "--functions", "bash,read_file,echo", "--sandbox", "off"),
            *("--workspace", str(folder / "stdio-ws"), "--policy", str(policy)),
        ],
        env=tool_env(),
    )

    async def go() -> tuple[list[str], Any, Any]:
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            secret = await client.call_tool("read_file", {"path": "secrets/x"})
            bash = await client.call_tool("bash", {"command": "echo ran"})
            return names, secret, bash

    names, secret, bash = anyio.run(go)
    assert names == ["read_file", "echo"]
    assert secret.is_error and secret.content[0].text == "Secrets stay put: ask the security team."
    assert bash.is_error and "not served" in bash.content[0].text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_stdio_client_is_asked_before_a_held_call_runs(folder: Path, mode: str) -> None:
    """Over stdio, a handshake-era client is sent `elicitation/create` mid-call; a 2026-07-28 one
    gets it as the call's result. Accepted, the write happens; declined or cancelled, or a client
    without elicitation, nothing runs."""
    policy = folder / "stdio-approve.yaml"
    policy.write_text(POLICY)
    workspace = folder / f"stdio-approve-{mode}"
    workspace.mkdir(exist_ok=True)
    params = StdioServerParameters(
        command=toolroute_exe(),
        args=[
            *("serve", "--modules", TOOLS_MODULE, "--functions", "write_file", "--sandbox", "off"),
            *("--workspace", str(workspace), "--policy", str(policy)),
        ],
        env=tool_env(),
    )

    async def writes(answering: Answering | None) -> dict[str | None, tuple[list[str], Any]]:
        out: dict[str | None, tuple[list[str], Any]] = {}
        async with Client(params, mode=mode, elicitation_callback=answering) as client:  # type: ignore[arg-type]
            for action in ("accept", "decline", "cancel") if answering is not None else (None,):
                if answering is not None:
                    answering.action, answering.asked = str(action), []
                result = await client.call_tool("write_file", {"path": f"held/{action}.txt", "content": "x"})
                out[action] = ([] if answering is None else answering.asked, result)
        return out

    outcomes = {**anyio.run(writes, Answering("accept")), **anyio.run(writes, None)}
    for action, (asked, result) in outcomes.items():
        written = workspace / "held" / f"{action}.txt"
        text = result.content[0].text
        if action is None:
            assert asked == [] and result.is_error and "needs a person's approval" in text
        else:
            assert asked == ["Allow the call to 'write_file'? Writes under held/ wait for a person."]
        if action == "accept":
            assert not result.is_error and written.read_text() == "x"
        else:
            assert result.is_error and not written.exists(), text


class NameOrYes(Answering):
    """Answers the approval with `action`, and an upstream's question for a name with Ada."""

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        if params.message.startswith("Allow the call"):
            return types.ElicitResult(action=self.action, content={} if self.action == "accept" else None)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_approved_call_whose_upstream_asks_in_turn_over_stateful_http(folder: Path, mode: str) -> None:
    """Stateful HTTP (no auth), an upstream that asks for a name during the call: a handshake-era
    client is asked the approval, then the upstream's question, both mid-call; a 2026-07-28 client
    gets each as the call's result in turn, the approval kept through the upstream's round trip.
    Declined, the upstream is never called."""
    policy = folder / "asking-approve.yaml"
    policy.write_text(
        "rules:\n  - id: names-need-a-person\n    when: args.tag.startsWith('held')\n    effect: approve\n"
        "    reason: Asking names waits for a person.\n"
    )
    entry = {"command": sys.executable, "args": [str(SERVERS / "asking_server.py")], "protocol": "2026-07-28"}
    (folder / "asking.json").write_text(json.dumps({"mcpServers": {"asking": entry}}))
    audit = folder / f"asking-audit-{mode}.jsonl"
    args = ["--mcp-config", str(folder / "asking.json"), "--mcp-servers", "asking", "--policy", str(policy)]
    args += ["--audit-log", str(audit)]

    async def go(url: str) -> list[tuple[list[str], Any]]:
        answering = NameOrYes("accept")
        out = []
        async with Client(url, mode=mode, elicitation_callback=answering) as client:  # type: ignore[arg-type]
            (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("ask_name")]
            for tag, action in [("held-1", "accept"), ("held-2", "decline"), ("open", "decline")]:
                answering.action, answering.asked = action, []
                result = await client.call_tool(name, {"tag": tag})
                out.append((answering.asked, (result.is_error, result.content[0].text)))  # type: ignore[union-attr]
        return out

    with http_server(args) as url:
        accepted, declined, unheld = anyio.run(go, url)
    allow = "Allow the call to 'ask_name'? Asking names waits for a person."
    assert accepted == ([allow, "What is your name? (asked for held-1)"], (False, "hello Ada (held-1)"))
    assert declined[0] == [allow] and declined[1][0] is True and "answered decline" in declined[1][1]
    assert unheld == (["What is your name? (asked for open)"], (False, "hello Ada (open)"))
    # Only the upstream's questions are audited as questions (issue 60); the approval is on the
    # call's own line. A handshake-era client answered them mid-call; a 2026-07-28 one was handed them.
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    questions = [(q["server"], q["question"], q["outcome"]) for q in lines if q["level"] == "question"]
    outcome = "accept" if mode == "legacy" else "input_required"
    assert questions == [("asking", "elicitation (form)", outcome)] * 2
