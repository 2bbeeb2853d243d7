"""Progress and cancellation through the gateway (issue 23, part 2). A served client's
`progressToken` reaches the upstream call and the upstream's `notifications/progress` come back
to that client unchanged (compared with a client connected straight to the upstream server); a
client's cancel reaches the upstream server, which observes it; bash reports progress while its
command runs. Real processes: the SDK's own client, `toolroute serve` over stdio and HTTP, and
the demo server (the SDK's `MCPServer`) as the upstream over stdio."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import demo_stdio
from _serve_helpers import http_server, tool_env, toolroute_exe
from mcp import Client, StdioServerParameters

MODES = ["auto", "legacy"]  # 2026-07-28 stateless and the 2025-11-25 handshake
Report = tuple[float, "float | None", "str | None"]


def long_upstream() -> dict[str, Any]:
    entry = demo_stdio("long")
    entry["args"] = [*entry["args"], "--long"]
    return entry


def write_config(tmp_path: Path) -> list[str]:
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"long": long_upstream()}}))
    return ["--mcp-config", str(tmp_path / "servers.json"), "--mcp-servers", "long"]


async def steps_with_progress(target: object, mode: str, count: int) -> tuple[str, list[Report]]:
    reports: list[Report] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with Client(target, mode=mode) as client:  # type: ignore[arg-type]
        (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("steps")]
        result = await client.call_tool(name, {"count": count}, progress_callback=on_progress)
        assert not result.is_error, result
        return result.content[0].text, reports  # type: ignore[union-attr]


def direct_params() -> StdioServerParameters:
    upstream = long_upstream()
    return StdioServerParameters(command=upstream["command"], args=upstream["args"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_upstream_progress_reaches_the_served_client_unchanged(tmp_path: Path, transport: str, mode: str) -> None:
    args = write_config(tmp_path)
    their_text, theirs = anyio.run(steps_with_progress, direct_params(), "legacy", 5)
    assert theirs == [(i, 5, f"step {i} of 5") for i in range(1, 6)], "the upstream reports (or this means nothing)"
    if transport == "stdio":
        served = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())
        our_text, ours = anyio.run(steps_with_progress, served, mode, 5)
    else:
        with http_server(args) as url:
            our_text, ours = anyio.run(steps_with_progress, url, mode, 5)
    assert ours == theirs
    assert our_text == their_text


def test_a_call_without_a_progress_token_gets_no_progress(tmp_path: Path) -> None:
    """Upstream is asked for progress only when the served client asked: nothing arrives unasked
    (the SDK client drops stray notifications, so the count is read off the server's answer)."""
    args = write_config(tmp_path)
    served = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())

    async def go() -> str:
        async with Client(served) as client:
            (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("steps")]
            result = await client.call_tool(name, {"count": 3})
            return result.content[0].text  # type: ignore[union-attr]

    assert anyio.run(go) == "3 steps"


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return path.exists()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_cancel_from_the_client_reaches_the_upstream_server(tmp_path: Path, transport: str) -> None:
    args = write_config(tmp_path)
    marker = tmp_path / "call"

    async def cancel_mid_call(target: object) -> None:
        async with Client(target) as client:  # type: ignore[arg-type]
            (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith("until_cancelled")]
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, name, {"marker": str(marker)})
                with anyio.fail_after(20):
                    while not Path(str(marker) + ".started").exists():
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
            # The session stays open while the cancel travels on; the server sees it.
            with anyio.fail_after(10):
                while not Path(str(marker) + ".cancelled").exists():
                    await anyio.sleep(0.05)

    if transport == "stdio":
        served = StdioServerParameters(command=toolroute_exe(), args=["serve", *args], env=tool_env())
        anyio.run(cancel_mid_call, served)
    else:
        with http_server(args) as url:
            anyio.run(cancel_mid_call, url)
    assert Path(str(marker) + ".cancelled").exists()


@pytest.mark.parametrize("mode", MODES)
def test_bash_reports_progress_while_its_command_runs(tmp_path: Path, mode: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--workspace", str(workspace), "--functions", "bash", "--sandbox", "off"],
        env=tool_env(),
    )
    reports: list[Report] = []

    async def go() -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total, message))

        async with Client(served, mode=mode) as client:
            return await client.call_tool(
                "bash", {"command": "sleep 2.6; echo finished"}, progress_callback=on_progress
            )

    result = anyio.run(go)
    assert not result.is_error and "finished" in result.content[0].text
    assert len(reports) >= 2, reports
    progresses = [p for p, _, _ in reports]
    assert progresses == sorted(set(progresses)), "progress only increases"
    assert all(total is None and message and "running" in message for _, total, message in reports)


@pytest.mark.parametrize("mode", MODES)
def test_grep_reports_progress_while_it_searches(tmp_path: Path, mode: str) -> None:
    """A search over a few thousand files, reported every 10 ms: the client hears the count of
    files searched grow, then gets the same answer as without progress."""
    workspace = tmp_path / "ws"
    for d in range(40):
        (workspace / f"d{d}").mkdir(parents=True)
        for i in range(100):
            needle = b"needle\n" if i == 7 else b""
            (workspace / f"d{d}" / f"f{i}.txt").write_bytes(b"hay stack line\n" * 2000 + needle)
    served = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--workspace", str(workspace), "--functions", "grep"],
        env=tool_env(TOOLROUTE_PROGRESS_INTERVAL="0.01", TOOLROUTE_SEARCH_INDEX="0"),
    )
    reports: list[Report] = []

    async def go() -> tuple[Any, Any]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total, message))

        async with Client(served, mode=mode) as client:
            args = {"pattern": r"ne+dle$", "output_mode": "count"}
            with_progress = await client.call_tool("grep", args, progress_callback=on_progress)
            without = await client.call_tool("grep", args)
            return with_progress, without

    with_progress, without = anyio.run(go)
    assert not with_progress.is_error and "Found 40 matching lines in 40 files" in with_progress.content[0].text
    assert with_progress.content[0].text == without.content[0].text
    assert reports, "no progress while 4,000 files (120 MB) were searched"
    progresses = [p for p, _, _ in reports]
    assert progresses == sorted(set(progresses)) and all(0 < p <= 4000 for p in progresses), reports
    assert all(total is None and message == f"searched {int(p)} files" for p, total, message in reports)
