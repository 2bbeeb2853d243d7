"""The exit-code table of docs/usage.md, one row at a time, through the installed `toolroute` script
(issue 14, item 15)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from _serve_helpers import TOOLS_MODULE, run_cli, tool_env, toolroute_exe

from toolroute import cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
MOD = ("--modules", TOOLS_MODULE)


def documented_codes() -> dict[int, str]:
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def test_the_table_lists_exactly_the_codes_the_cli_defines() -> None:
    defined = {v for k, v in vars(cli).items() if k.startswith("EXIT_")}
    assert set(documented_codes()) == defined
    assert cli.EXIT_BROKEN_PIPE == 141


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolroute: error: "), proc.stderr
    return lines[0]


def test_0_success(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    proc = run_cli("call", "read_file", '{"path": "a.txt"}', cwd=tmp_path)
    assert proc.returncode == cli.EXIT_OK and "hello" in proc.stdout and proc.stderr == ""


def test_1_internal_error_is_reserved_for_bugs(tmp_path: Path) -> None:
    # The only way to reach it from outside is a bug; make one by breaking the output encoder.
    proc = subprocess.run(
        [toolroute_exe(), "call", "echo", '{"text": "\\ud800"}', *MOD],
        capture_output=True,
        text=True,
        env=tool_env(PYTHONIOENCODING="ascii:strict"),
        timeout=120,
        check=False,
    )
    assert proc.returncode == cli.EXIT_INTERNAL, proc.stderr
    assert "internal error" in error_line(proc)


def test_2_bad_usage(tmp_path: Path) -> None:
    proc = run_cli("call", "read_file", '{"path": 5}', cwd=tmp_path)
    assert proc.returncode == cli.EXIT_USAGE
    proc = run_cli("call", "read_file", '{"path": "/etc/hostname"}', cwd=tmp_path)  # outside the roots
    assert proc.returncode == cli.EXIT_USAGE, proc.stderr


def test_3_not_found(tmp_path: Path) -> None:
    proc = run_cli("call", "read_fil", "{}", cwd=tmp_path)
    assert proc.returncode == cli.EXIT_NOT_FOUND and "did you mean" in error_line(proc)


@pytest.mark.parametrize(
    ("tool", "args", "needle"),
    [
        ("read_file", '{"path": "missing.txt"}', "no such file"),
        ("edit", '{"path": "missing.txt", "old_string": "a", "new_string": "b"}', "no such file"),
        ("edit", '{"path": "a.txt", "old_string": "zzz", "new_string": "b"}', "old_string was not found"),
        ("write_file", '{"path": "a.txt", "content": "x", "mode": "create"}', "already exists"),
        (
            "apply_patch",
            '{"patch": "*** Begin Patch\\n*** Update File: a.txt\\n@@\\n-nope\\n+yes\\n*** End Patch"}',
            "a.txt",
        ),
    ],
)
def test_4_the_tool_ran_and_failed(tmp_path: Path, tool: str, args: str, needle: str) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    proc = run_cli("call", tool, args, cwd=tmp_path)
    assert proc.returncode == cli.EXIT_TOOL_FAILED, proc.stderr
    assert needle in error_line(proc)
    assert (tmp_path / "a.txt").read_text() == "hello\n"


def test_4_a_tool_that_raises(tmp_path: Path) -> None:
    proc = run_cli("call", "fail", '{"reason": "boom"}', *MOD)
    assert proc.returncode == cli.EXIT_TOOL_FAILED and "boom" in error_line(proc)


def test_2_a_malformed_patch_or_edit_is_still_bad_usage(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    assert run_cli("call", "apply_patch", '{"patch": "not a patch"}', cwd=tmp_path).returncode == cli.EXIT_USAGE
    same = '{"path": "a.txt", "old_string": "hello", "new_string": "hello"}'
    assert run_cli("call", "edit", same, cwd=tmp_path).returncode == cli.EXIT_USAGE


def test_5_a_bash_timeout_prints_the_result_and_exits_5(tmp_path: Path) -> None:
    proc = run_cli("call", "bash", '{"command": "echo started; sleep 10", "timeout": 1}', cwd=tmp_path)
    assert proc.returncode == cli.EXIT_TIMEOUT, proc.stderr
    assert '"timedOut": true' in proc.stdout and "started" in proc.stdout
    assert "ran out of time" in error_line(proc)


def test_5_a_timeout_error(tmp_path: Path) -> None:
    assert run_cli("call", "too_slow", "{}", *MOD).returncode == cli.EXIT_TIMEOUT


def test_0_a_failing_command_is_a_successful_bash_call(tmp_path: Path) -> None:
    proc = run_cli("call", "bash", '{"command": "exit 3"}', cwd=tmp_path)
    assert proc.returncode == cli.EXIT_OK and '"exitCode": 3' in proc.stdout


def _closed_reader(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run toolroute with a stdout pipe whose reading end is already closed: every write gets EPIPE."""
    proc = subprocess.Popen(
        [toolroute_exe(), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env()
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return subprocess.CompletedProcess(args, proc.wait(timeout=120), "", err)


@pytest.mark.parametrize(
    "args",
    [
        ("tools",),
        ("tools", "--format", "table"),
        ("call", "bash", '{"command": "seq 1 200000"}', "--max-output-chars", "2000000"),
    ],
)
def test_141_a_closed_pipe_is_a_quiet_exit(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = _closed_reader(*args, cwd=tmp_path)
    assert proc.returncode == cli.EXIT_BROKEN_PIPE
    # Nothing about the pipe; the one notice `tools` prints is which confinement bash runs under.
    assert [line for line in proc.stderr.splitlines() if not line.startswith("toolroute: bash:")] == []


def test_piping_into_head_prints_nothing_on_stderr(tmp_path: Path) -> None:
    script = f"'{toolroute_exe()}' call bash '{{\"command\": \"seq 1 200000\"}}' --max-output-chars 2000000 | head -1"
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.stderr == ""
    assert proc.stdout.startswith("{")
    assert proc.returncode in (cli.EXIT_OK, cli.EXIT_BROKEN_PIPE)  # 0 when everything fit the pipe first
