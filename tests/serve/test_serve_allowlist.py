"""The served allowlist, in process: what is listed is what can be called, and nothing else."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from _serve_helpers import make_router
from _serve_tools import MARKER_ENV
from mcp import Client

from toolroute import ToolRouter
from toolroute.serve import ServedTools, build_server


@pytest.fixture
def router(tmp_path: Path) -> ToolRouter:
    with make_router(tmp_path) as r:
        yield r


async def _list_and_call(served: ServedTools, calls: list[tuple[str, dict]]) -> tuple[list, list]:
    async with Client(build_server(served)) as client:
        listed = (await client.list_tools()).tools
        results = [await client.call_tool(name, args) for name, args in calls]
    return listed, results


def run(served: ServedTools, *calls: tuple[str, dict]) -> tuple[list, list]:
    return anyio.run(_list_and_call, served, list(calls))


def test_lists_exactly_the_allowlist_with_the_router_schemas(router: ToolRouter) -> None:
    served = ServedTools(router, ["echo", "add"], ["notes"])
    listed, _ = run(served)
    assert [t.name for t in listed] == ["echo", "add", "notes_shout"]
    expected = {d["function"]["name"]: d["function"] for d in router.get_all_tools(["echo", "add"], ["notes"])}
    for tool in listed:
        assert tool.input_schema == expected[tool.name]["parameters"]
        assert tool.description == expected[tool.name]["description"]
    echo = listed[0]
    assert echo.annotations is not None
    assert (echo.annotations.read_only_hint, echo.annotations.idempotent_hint) == (True, True)


def test_served_tools_answer_with_the_router_text(router: ToolRouter) -> None:
    served = ServedTools(router, ["echo", "add"], ["notes"])
    _, (echo, add, shout) = run(
        served, ("echo", {"text": "ab", "times": 2}), ("add", {"a": 1, "b": 2}), ("notes_shout", {"text": "x"})
    )
    assert [r.is_error for r in (echo, add, shout)] == [False, False, False]
    assert [r.content[0].text for r in (echo, add, shout)] == ["abab", '{"sum":3}', "X"]


def test_a_tool_the_router_has_but_this_server_does_not_serve_is_refused_and_never_runs(
    router: ToolRouter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran.txt"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    router.invoke("touch_marker")  # reachable through the router itself...
    assert marker.read_text() == "ran"
    marker.unlink()
    served = ServedTools(router, ["echo"])
    _, (result,) = run(served, ("touch_marker", {}))  # ...but not through a server that did not list it
    assert result.is_error
    assert result.content[0].text == "tool 'touch_marker' is not served by this server"
    assert not marker.exists()


@pytest.mark.parametrize("name", ["bash", "read_file", "notes_shout", "user_1_tool_echo", "nope", "", "echo "])
def test_every_name_outside_the_allowlist_gets_the_same_refusal(router: ToolRouter, name: str) -> None:
    served = ServedTools(router, ["echo"])
    _, (result,) = run(served, (name, {"command": "id"}))
    assert result.is_error
    assert result.content[0].text == f"tool {name!r} is not served by this server"


def test_tool_errors_come_back_as_error_results(router: ToolRouter) -> None:
    served = ServedTools(router, ["echo", "fail"])
    _, (bad_args, failed) = run(served, ("echo", {"text": 3}), ("fail", {"reason": "boom"}))
    assert bad_args.is_error and "valid string" in bad_args.content[0].text
    assert failed.is_error and "RuntimeError: boom" in failed.content[0].text


def test_an_unknown_name_in_the_allowlist_fails_at_construction(router: ToolRouter) -> None:
    from toolroute import ToolNotFoundError

    with pytest.raises(ToolNotFoundError):
        ServedTools(router, ["echo", "ecko"])


def test_builtin_bash_is_refused_when_only_read_file_is_served(router: ToolRouter, tmp_path: Path) -> None:
    marker = tmp_path / "bash-ran"
    served = ServedTools(router, ["read_file"])
    listed, (result,) = run(served, ("bash", {"command": f"touch {marker}"}))
    assert [t.name for t in listed] == ["read_file"]
    assert result.is_error and "not served" in result.content[0].text
    assert not marker.exists()
