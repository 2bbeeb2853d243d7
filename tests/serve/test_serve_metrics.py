"""Prometheus metrics of a real `toolroute serve --metrics` (issue 59), scraped over HTTP and
parsed with `prometheus_client.parser`: counts per outcome, histogram totals, an upstream's
`up` flipping when its process is killed, and no user id or argument value in any label."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _mcp_helpers import script_stdio, wait_until
from _serve_helpers import TOOLS_MODULE, ServedProcess, outside_tmp, processes_with, served_http
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families

from toolroute.serve.store import UserStore

SECRET_ARGUMENT = "argument-value-7f3a"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ServedProcess, str, str]]:
    tmp = outside_tmp()
    try:
        store_url = f"sqlite:///{tmp / 'users.db'}"
        with UserStore(store_url) as store:
            store.add_user("bob-the-user")
            key = store.add_key("bob-the-user")
        (tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"args": script_stdio("args_server.py")}}))
        args = [
            *("--modules", TOOLS_MODULE, "--functions", "echo,fail,bash", "--mcp-config", str(tmp / "mcp.json")),
            *("--mcp-servers", "args", "--api-keys", "--store", store_url),
            *("--workspace-template", str(tmp / "ws" / "{user}"), "--metrics", "127.0.0.1:0"),
        ]
        with served_http(args) as server:
            server.wait_for("metrics at http://")
            metrics = next(line for line in server.seen if "metrics at http://" in line).split(" at ", 1)[1].strip()
            yield server, metrics, key
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def scrape(url: str) -> dict[str, list[Any]]:
    text = httpx2.get(url, timeout=30).text
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(families: dict[str, list[Any]], sample: str, **labels: str) -> float:
    family = families[sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")]
    return sum(s.value for s in family if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()))


async def _calls(url: str, key: str) -> list[bool]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        out = []
        for name, arguments in [
            ("echo", {"text": SECRET_ARGUMENT}),
            ("echo", {"text": "b"}),
            ("fail", {"reason": SECRET_ARGUMENT}),
            ("no_such_tool_" + SECRET_ARGUMENT, {}),
            ("echo", {"text": 5, "times": "many"}),
            ("status", {"service": SECRET_ARGUMENT}),
        ]:
            out.append(bool((await client.call_tool(name, arguments)).is_error))
        return out


def test_calls_are_counted_by_tool_and_outcome_with_no_user_or_argument_in_labels(
    served: tuple[ServedProcess, str, str],
) -> None:
    server, metrics, key = served
    assert anyio.run(_calls, server.url, key) == [False, False, True, True, True, False]
    families = scrape(metrics)
    assert value(families, "toolroute_tool_calls_total", tool="echo", outcome="ok") == 2
    assert value(families, "toolroute_tool_calls_total", tool="echo", outcome="bad_arguments") == 1
    assert value(families, "toolroute_tool_calls_total", tool="fail", outcome="failed") == 1
    assert value(families, "toolroute_tool_calls_total", tool="_unknown", outcome="not_found") == 1
    assert value(families, "toolroute_tool_calls_total", tool="status", outcome="ok") == 1
    # The histogram saw every call: its counts add up to the counter's.
    calls = sum(s.value for s in families["toolroute_tool_calls"] if s.name == "toolroute_tool_calls_total")
    assert value(families, "toolroute_tool_call_duration_seconds_count") == calls == 6
    assert value(families, "toolroute_tool_call_duration_seconds_count", tool="echo") == 3
    assert value(families, "toolroute_active_sessions") == 1
    assert "process_cpu_seconds" in families or "process_cpu_seconds_total" in str(families)
    labels = [v for samples in families.values() for s in samples for v in s.labels.values()]
    assert not [v for v in labels if "bob" in v or SECRET_ARGUMENT in v]


async def _commands(url: str, key: str, commands: list[str]) -> list[str]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        results = [await client.call_tool("bash", {"command": c}) for c in commands]
        return ["".join(getattr(c, "text", "") for c in r.content) for r in results]


def test_command_starts_are_counted_by_sandbox(served: tuple[ServedProcess, str, str]) -> None:
    server, metrics, key = served
    before = scrape(metrics)
    assert value(before, "toolroute_sandbox_spawns_total") == 0
    outputs = anyio.run(_commands, server.url, key, ["echo one", "echo two", "echo three"])
    results = [json.loads(o) for o in outputs]
    assert [r["exitCode"] for r in results] == [0, 0, 0], outputs
    (sandbox,) = {(r.get("sandbox") or {}).get("confinement") or "none" for r in results}
    families = scrape(metrics)
    started = [s for s in families["toolroute_sandbox_spawns"] if s.labels["result"] == "started" and s.value]
    assert [(s.labels["sandbox"], s.value) for s in started] == [(sandbox, 3)]  # as the commands said
    assert value(families, "toolroute_sandbox_spawns_total", sandbox=sandbox, result="failed") == 0
    assert value(families, "toolroute_sandbox_spawn_seconds_total", sandbox=sandbox) > 0


def test_upstream_up_flips_when_the_upstream_is_killed(served: tuple[ServedProcess, str, str]) -> None:
    server, metrics, key = served
    assert anyio.run(_calls, server.url, key)[-1] is False  # the upstream is connected
    assert value(scrape(metrics), "toolroute_upstream_up", server="args") == 1
    ours = [pid for pid in processes_with("args_server.py") if _parent(pid) == server.proc.pid]
    assert ours  # this server's upstream, never another test's
    for pid in ours:
        os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: value(scrape(metrics), "toolroute_upstream_up", server="args") == 0, timeout=30)
