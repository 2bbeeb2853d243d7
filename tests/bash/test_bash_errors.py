"""Every bad input to bash gets a clear error, and no process is started for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _bash_helpers import call

from toolroute.builtins._process.table import INSTANCE, instance_of
from toolroute.builtins.bash import TOOL
from toolroute.errors import PathDeniedError, ToolArgumentError, ToolExecutionError
from toolroute.router import ToolRouter


def test_the_tool_is_registered_and_not_read_only(bash: ToolRouter) -> None:
    assert TOOL.read_only is False
    assert bash.traits("bash").read_only is False
    params = bash.definition("bash")["function"]["parameters"]
    assert params["properties"]["action"]["enum"] == ["exec", "start", "status", "logs", "write", "stop", "list"]
    assert "timeout_ms" not in params["properties"]  # accepted (as timeoutMs), not advertised


def test_unknown_action(bash: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match=r"action: Input should be 'exec', 'start'.*'list'"):
        call(bash, action="run", command="true")


def test_unknown_parameter(bash: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match="shell: Extra inputs are not permitted"):
        call(bash, command="true", shell="zsh")


@pytest.mark.parametrize("action", ["exec", "start"])
@pytest.mark.parametrize("command", [None, "", "   "])
def test_missing_command(bash: ToolRouter, action: str, command: str | None) -> None:
    args = {"action": action} if command is None else {"action": action, "command": command}
    with pytest.raises(ToolArgumentError, match=f"bash {action} requires a non-empty command"):
        call(bash, **args)


@pytest.mark.parametrize("cwd", ["..", "/etc", "../../.."])
def test_cwd_outside_the_roots(bash: ToolRouter, cwd: str) -> None:
    # Refused as a denied path; `..` is refused by the descriptor walk, whose message names the
    # step it could not take rather than the roots.
    with pytest.raises(PathDeniedError, match=r"outside the allowed roots|cannot resolve"):
        call(bash, command="touch escaped", cwd=cwd)


def test_cwd_through_a_symlink_that_escapes(bash: ToolRouter, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    with pytest.raises(PathDeniedError, match="outside the allowed roots"):
        call(bash, action="start", command="touch escaped", cwd="link")
    assert not (outside / "escaped").exists()


def test_cwd_that_is_not_a_directory(bash: ToolRouter, ws: Path) -> None:
    (ws / "file.txt").write_text("x")
    with pytest.raises(ToolArgumentError, match=r"cwd 'file\.txt' is not a directory"):
        call(bash, command="true", cwd="file.txt")
    with pytest.raises(ToolArgumentError, match=r"cwd 'missing' is not a directory"):
        call(bash, command="true", cwd="missing")


@pytest.mark.parametrize("action", ["status", "logs", "write", "stop"])
def test_unknown_process_id(bash: ToolRouter, action: str) -> None:
    with pytest.raises(ToolArgumentError, match=r"unknown process_id 'proc_nope'.*action=list"):
        call(bash, action=action, process_id="proc_nope", input="x")


@pytest.mark.parametrize("action", ["status", "logs", "write", "stop"])
def test_a_process_id_of_another_server_instance_is_reported_lost(bash: ToolRouter, action: str) -> None:
    other = "0" * 8 if INSTANCE != "0" * 8 else "1" * 8
    lost = f"proc_{other}_{'a' * 32}"
    with pytest.raises(ToolExecutionError, match=r"is lost: it was started on another server instance"):
        call(bash, action=action, process_id=lost, input="x")
    # This instance's own tag on an id it never handed out is merely unknown, not lost.
    with pytest.raises(ToolArgumentError, match="unknown process_id"):
        call(bash, action=action, process_id=f"proc_{INSTANCE}_{'a' * 32}", input="x")


def test_process_ids_carry_this_instances_tag(bash: ToolRouter) -> None:
    started = call(bash, action="start", command="true")
    assert instance_of(started["processId"]) == INSTANCE


@pytest.mark.parametrize("action", ["status", "logs", "write", "stop"])
def test_missing_process_id(bash: ToolRouter, action: str) -> None:
    with pytest.raises(ToolArgumentError, match=f"bash {action} requires a non-empty process_id"):
        call(bash, action=action)


def test_write_without_input(bash: ToolRouter) -> None:
    proc = call(bash, action="start", command="cat")
    with pytest.raises(ToolArgumentError, match="bash write requires input"):
        call(bash, action="write", process_id=proc["processId"])


def test_write_after_the_process_ended(bash: ToolRouter) -> None:
    proc = call(bash, action="start", command="true")
    call(bash, action="stop", process_id=proc["processId"])
    with pytest.raises(ToolExecutionError, match="has ended; its stdin is closed"):
        call(bash, action="write", process_id=proc["processId"], input="late\n")


def test_bad_types(bash: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match="timeout: Input should be a valid number"):
        call(bash, command="true", timeout="soon")
    with pytest.raises(ToolArgumentError, match="stream: Input should be 'both', 'stdout' or 'stderr'"):
        call(bash, action="logs", process_id="x", stream="all")


def test_a_closed_router_refuses_calls(ws: Path) -> None:
    router = ToolRouter()
    router.close()
    with pytest.raises(ToolExecutionError, match="the router is closed"):
        router.invoke("bash", {"command": "true"})
