"""Tasks through `toolroute serve` (issue 60). The gateway runs tasks itself (MCP 2025-11-25; the
installed `mcp` SDK has the types and no server or client that handles them): a task-augmented
`tools/call` is answered with a task at once and runs on; `tasks/get`, `tasks/result`,
`tasks/cancel`, `tasks/list` reach it, and only its own user's. Real processes: `toolroute serve`
over stdio and HTTP, the demo server (the SDK's `MCPServer`) as the upstream, the SDK's client
sending the task requests raw. Toward upstreams nothing changed: an upstream that runs a tool only
as a task (`task_server.py`, bare JSON-RPC, the 2026-07-28 Tasks extension) is refused with a
plain tool error naming the reason, not the SDK's error text."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _mcp_helpers import SERVERS, demo_stdio
from _serve_helpers import alice_and_bob_served, http_server, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from toolroute.serve.tasks import RELATED_TASK

TASK_SERVER = str(SERVERS / "task_server.py")


def served(tmp_path: Path) -> StdioServerParameters:
    entry = {"command": sys.executable, "args": [TASK_SERVER], "protocol": "2026-07-28"}
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"jobs": entry}}))
    args = ["serve", "--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "jobs"]
    return StdioServerParameters(command=toolroute_exe(), args=args, env=tool_env())


async def calls(target: Any, mode: str) -> list[Any]:
    out: list[Any] = []
    async with Client(target, mode=mode) as client:
        for name, arguments in (("quick", {"text": "hi"}), ("long_job", {})):
            try:
                result = await client.call_tool(name, arguments)
            except MCPError as exc:
                out.append(("error", exc.error.code))
                continue
            out.append((result.is_error, [c.text for c in result.content]))  # type: ignore[union-attr]
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_task_only_tool_is_refused_plainly(tmp_path: Path, mode: str) -> None:
    """Directly, the SDK's client (which declares no tasks) gets -32021 for the task-only tool;
    through the gateway, a client of either era gets a tool error that says why, and the
    server's other tool runs."""
    direct = StdioServerParameters(command=sys.executable, args=[TASK_SERVER])
    assert anyio.run(calls, direct, "auto") == [(False, ["hi"]), ("error", types.MISSING_REQUIRED_CLIENT_CAPABILITY)]
    quick, job = anyio.run(calls, served(tmp_path), mode)
    assert quick == (False, ["hi"])
    assert job == (
        True,
        [
            "MCP server 'jobs' runs 'long_job' only as a task (the MCP Tasks extension), "
            "which this gateway does not pass through"
        ],
    )


# ---- tasks the gateway runs --------------------------------------------------------------------

# The era whose types carry tasks (`capabilities.tasks`, a call's `task`): the handshake's.
TASKS_MODE = "legacy"


def long_upstream(folder: Path) -> list[str]:
    """The demo server with its slow tools (`steps`, `until_cancelled`) as upstream `long`."""
    entry = demo_stdio("long")
    entry["args"] = [*entry["args"], "--long"]
    (folder / "servers.json").write_text(json.dumps({"mcpServers": {"long": entry}}))
    return ["--mcp-config", str(folder / "servers.json"), "--mcp-servers", "long"]


class Tasks:
    """One client's task requests, sent raw (the SDK's client has no API for them)."""

    def __init__(self, client: Client, names: list[str]) -> None:
        self.session = client.session
        self.names = names

    def tool(self, suffix: str) -> str:
        (name,) = [n for n in self.names if n.endswith(suffix)]
        return name

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        params = types.CallToolRequestParams(name=name, arguments=arguments)
        return await self.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)

    async def create(self, name: str, arguments: dict[str, Any], ttl: int | None = None) -> types.Task:
        # Past the SDK client's check of a `tools/call` answer against `CallToolResult` (it has
        # no task API, so it takes no task): the request as it would send it, the answer read here.
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=arguments, task=types.TaskMetadata(ttl=ttl))
        )
        params = request.model_dump(by_alias=True, mode="json", exclude_none=True)["params"]
        raw = await self.session._dispatcher.send_raw_request("tools/call", params, {})
        return types.CreateTaskResult.model_validate(raw, by_name=False).task

    async def get(self, task_id: str) -> types.GetTaskResult:
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        return await self.session.send_request(request, types.GetTaskResult)

    async def result(self, task_id: str) -> types.CallToolResult:
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self.session.send_request(request, types.CallToolResult)

    async def cancel(self, task_id: str) -> types.CancelTaskResult:
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        return await self.session.send_request(request, types.CancelTaskResult)

    async def list(self) -> list[str]:
        listed = await self.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        return [t.task_id for t in listed.tasks]

    async def until(self, task_id: str, done: Any, seconds: float = 60) -> types.GetTaskResult:
        """Polls `tasks/get` until `done(task)`, within `seconds` (a hang fails, not a slow machine)."""
        with anyio.fail_after(seconds):
            for _ in range(int(seconds / 0.05)):
                task = await self.get(task_id)
                if done(task):
                    return task
                await anyio.sleep(0.05)
        raise AssertionError(f"task {task_id} stayed {task.status}")


def ended(task: types.Task) -> bool:
    return task.status in ("completed", "failed", "cancelled")


@contextlib.asynccontextmanager
async def tasks_of(target: Any, key: str | None = None) -> AsyncIterator[Tasks]:
    if key is None:
        async with Client(target, mode=TASKS_MODE) as client:
            yield Tasks(client, [t.name for t in (await client.list_tools()).tools])
        return
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(target, http_client=http), mode=TASKS_MODE) as client:
        yield Tasks(client, [t.name for t in (await client.list_tools()).tools])


def without_task_meta(result: types.CallToolResult) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    meta = {k: v for k, v in (dumped.pop("_meta", None) or {}).items() if k != RELATED_TASK}
    return {**dumped, "_meta": meta}


async def run_as_task(target: Any) -> dict[str, Any]:
    async with Client(target, mode=TASKS_MODE) as client:
        declared = client.server_capabilities.tasks
        listed = {t.name: t.execution for t in (await client.list_tools()).tools}
    async with tasks_of(target) as tasks:
        steps = tasks.tool("steps")
        plain = await tasks.call(steps, {"count": 3})
        created = await tasks.create(steps, {"count": 3}, ttl=60_000)
        last = await tasks.until(created.task_id, ended)
        result = await tasks.result(created.task_id)
        return {
            "declared": declared,
            "listed": listed[steps],
            "created": (created.status, created.ttl),
            "ended": last.status,
            "listed tasks": await tasks.list(),
            "task": created.task_id,
            "related": (result.meta or {}).get(RELATED_TASK),
            "plain": without_task_meta(plain),
            "result": without_task_meta(result),
        }


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_call_run_as_a_task_ends_with_the_plain_calls_result(tmp_path: Path, transport: str) -> None:
    """The gateway declares tasks for `tools/call` and lists every tool as callable as one; a
    task-augmented call is answered with a working task, which completes; `tasks/result` is the
    plain call's result, with the task named in its `_meta`."""
    args = ["serve", *long_upstream(tmp_path)]
    if transport == "stdio":
        seen = anyio.run(run_as_task, StdioServerParameters(command=toolroute_exe(), args=args, env=tool_env()))
    else:
        with http_server(args[1:]) as url:
            seen = anyio.run(run_as_task, url)
    assert seen["declared"].requests.tools.call is not None and seen["declared"].cancel is not None
    assert seen["listed"].task_support == "optional"
    assert seen["created"] == ("working", 60_000)
    assert seen["ended"] == "completed"
    assert seen["listed tasks"] == [seen["task"]]
    assert seen["related"] == {"taskId": seen["task"]}
    assert seen["plain"]["content"] == [{"type": "text", "text": "3 steps"}]
    assert seen["result"] == seen["plain"]


def test_cancelling_a_task_cancels_its_upstream_call(tmp_path: Path) -> None:
    """The task is answered while its upstream call runs; `tasks/cancel` ends it as cancelled and
    the upstream server sees its call cancelled; a cancelled task has no result and cannot be
    cancelled again."""
    marker = tmp_path / "call"

    async def go(url: str) -> tuple[Any, ...]:
        async with tasks_of(url) as tasks:
            created = await tasks.create(tasks.tool("until_cancelled"), {"marker": str(marker)})
            with anyio.fail_after(30):
                while not Path(f"{marker}.started").exists():
                    await anyio.sleep(0.05)
            running = await tasks.get(created.task_id)
            cancelled = await tasks.cancel(created.task_id)
            with anyio.fail_after(30):
                while not Path(f"{marker}.cancelled").exists():
                    await anyio.sleep(0.05)
            with pytest.raises(MCPError) as no_result:
                await tasks.result(created.task_id)
            with pytest.raises(MCPError) as again:
                await tasks.cancel(created.task_id)
            last = await tasks.get(created.task_id)
            return running.status, cancelled.status, last.status, no_result.value.error.code, again.value.error
            # (the test's own cancel scopes are not involved: the upstream heard the gateway's)

    with http_server(long_upstream(tmp_path)) as url:
        running, cancelled, last, no_result, again = anyio.run(go, url)
    assert (running, cancelled, last) == ("working", "cancelled", "cancelled")
    assert no_result == types.INVALID_PARAMS
    assert again.code == types.INVALID_PARAMS and "terminal" in again.message


def tenants_served(extra: list[str], audit: list[Path] | None = None) -> Any:
    """alice and bob served with the slow upstream; `audit` gets the audit log's path."""

    def upstream(folder: Path) -> list[str]:
        if audit is None:
            return [*long_upstream(folder), *extra]
        audit.append(folder / "audit.jsonl")
        return [*long_upstream(folder), *extra, "--audit-log", str(audit[0])]

    return alice_and_bob_served(upstream)


def test_one_users_task_is_not_found_by_another(tmp_path: Path) -> None:
    """bob gets, waits for, cancels and lists alice's running task as if it did not exist (the
    error an unknown id gets); alice's task runs on and is hers to cancel. Its call holds her
    concurrency slot (`--max-concurrent-calls 1`): her plain call meanwhile is refused, bob's runs."""
    marker = tmp_path / "call"

    async def go(url: str, keys: dict[str, str]) -> dict[str, Any]:
        async with tasks_of(url, keys["alice"]) as alice, tasks_of(url, keys["bob"]) as bob:
            created = await alice.create(alice.tool("until_cancelled"), {"marker": str(marker)})
            with anyio.fail_after(30):
                while not Path(f"{marker}.started").exists():
                    await anyio.sleep(0.05)
            plain = {
                who: await tasks.call(tasks.tool("steps"), {"count": 1})
                for who, tasks in (("alice", alice), ("bob", bob))
            }
            unknown = created.task_id[::-1]
            refused = {}
            for what, request in (
                ("get", bob.get),
                ("result", bob.result),
                ("cancel", bob.cancel),
                ("unknown", alice.get),
            ):
                with pytest.raises(MCPError) as caught, anyio.fail_after(30):
                    await request(unknown if what == "unknown" else created.task_id)
                refused[what] = (caught.value.error.code, caught.value.error.message)
            seen = {
                "refused": refused,
                "bob lists": await bob.list(),
                "alice lists": await alice.list(),
                "alice's": (await alice.get(created.task_id)).status,
                "task": created.task_id,
                "plain": {who: (r.is_error, r.content[0].text) for who, r in plain.items()},  # type: ignore[union-attr]
            }
            seen["cancelled"] = (await alice.cancel(created.task_id)).status
            return seen

    with tenants_served(["--max-concurrent-calls", "1"]) as (url, keys):
        seen = anyio.run(go, url, keys)
    alices_call, bobs_call = seen["plain"]["alice"], seen["plain"]["bob"]
    assert alices_call[0] is True and "already has 1 calls running (limit 1)" in alices_call[1]
    assert bobs_call == (False, "1 steps")
    not_found = (types.INVALID_PARAMS, "Task not found")
    assert seen["refused"] == {"get": not_found, "result": not_found, "cancel": not_found, "unknown": not_found}
    assert seen["bob lists"] == [] and seen["alice lists"] == [seen["task"]]
    assert seen["alice's"] == "working" and seen["cancelled"] == "cancelled"


def test_a_users_tasks_are_bounded_in_number_and_in_how_long_they_are_kept(tmp_path: Path) -> None:
    """With `--max-tasks 1`: alice's second task is refused while her first is kept, bob's own
    allowance is untouched; with `--max-task-ttl 1` a finished task is gone (not found) once its
    second is up, after which alice may create again. Each task leaves audit lines (created,
    ended) naming its user and id."""

    async def go(url: str, keys: dict[str, str]) -> dict[str, Any]:
        async with tasks_of(url, keys["alice"]) as alice, tasks_of(url, keys["bob"]) as bob:
            steps = alice.tool("steps")
            first = await alice.create(steps, {"count": 1}, ttl=3_600_000)
            with pytest.raises(MCPError) as refused:
                await alice.create(steps, {"count": 1})
            bobs = await bob.create(steps, {"count": 1})
            # `tasks/result` waits for the end (a poll might come after the short ttl is over).
            results = [await alice.result(first.task_id), await bob.result(bobs.task_id)]
            with anyio.fail_after(60):
                for _ in range(600):
                    try:
                        await alice.get(first.task_id)
                    except MCPError as exc:
                        expired = exc.error.message
                        break
                    await anyio.sleep(0.1)
            second = await alice.create(steps, {"count": 1})
            results.append(await alice.result(second.task_id))
            return {
                "first": first.ttl,
                "results": [r.content[0].text for r in results],  # type: ignore[union-attr]
                "refused": (refused.value.error.code, refused.value.error.message),
                "expired": expired,
                "second": second.status,
                "ids": {"alice": [first.task_id, second.task_id], "bob": [bobs.task_id]},
            }

    audit: list[Path] = []
    with tenants_served(["--max-tasks", "1", "--max-task-ttl", "1"], audit) as (url, keys):
        seen = anyio.run(go, url, keys)
        lines = [json.loads(line) for line in audit[0].read_text().splitlines()]
    tasks = [(r["user"], r["task"], r["outcome"]) for r in lines if r["level"] == "task"]
    ids = seen["ids"]
    assert seen["first"] == 1000, "the asked ttl is bounded by --max-task-ttl"
    assert seen["results"] == ["1 steps"] * 3
    code, message = seen["refused"]
    assert code == types.INVALID_REQUEST and "too many tasks" in message and "limit is 1" in message
    assert seen["expired"] == "Task not found"
    assert seen["second"] == "working"
    assert sorted(tasks) == sorted(
        (user, task_id, outcome)
        for user, task_ids in ids.items()
        for task_id in task_ids
        for outcome in ("created", "completed")
    )


def test_a_task_only_tool_run_as_a_gateway_task_fails_saying_why(tmp_path: Path) -> None:
    """Listed as the gateway runs it (callable as a task), the upstream's task-only tool called as
    a task fails as its plain call does: the upstream is called plainly and refuses."""

    async def go() -> tuple[Any, ...]:
        async with tasks_of(served(tmp_path)) as tasks:
            created = await tasks.create("long_job", {})
            last = await tasks.until(created.task_id, ended)
            result = await tasks.result(created.task_id)
            return last.status, result.is_error, [c.text for c in result.content]  # type: ignore[union-attr]

    assert anyio.run(go) == (
        "failed",
        True,
        [
            "MCP server 'jobs' runs 'long_job' only as a task (the MCP Tasks extension), "
            "which this gateway does not pass through"
        ],
    )


def test_a_2026_client_is_offered_no_tasks(tmp_path: Path) -> None:
    """The 2026-07-28 revision has no `params.task` and the Tasks extension is not offered: a
    modern client sees no tasks capability, its `tasks/get` is an unknown method and its
    task-augmented call is processed plainly."""

    async def go() -> tuple[Any, ...]:
        async with Client(served(tmp_path), mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            with pytest.raises(MCPError) as refused:
                request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="task-1"))
                await client.session.send_request(request, types.GetTaskResult)
            params = types.CallToolRequestParams(
                name="quick", arguments={"text": "now"}, task=types.TaskMetadata(ttl=60000)
            )
            result = await client.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)
            capabilities = client.server_capabilities
            return capabilities.tasks, refused.value.error.code, [c.text for c in result.content]  # type: ignore[union-attr]

    assert anyio.run(go) == (None, types.METHOD_NOT_FOUND, ["now"])
