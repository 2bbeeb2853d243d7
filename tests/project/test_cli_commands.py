"""The installed `toolroute` entry point: tools, call, serve and bench, their output and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _serve_helpers import TOOLS_MODULE, run_cli, tool_env

from toolroute import cli
from toolroute.builtins import builtin_tools
from toolroute.cli import EXIT_NOT_FOUND, EXIT_TIMEOUT, EXIT_TOOL_FAILED, EXIT_USAGE, main

MOD = ("--modules", TOOLS_MODULE)


def names(definitions: list[dict]) -> list[str]:
    return [d["function"]["name"] for d in definitions]


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("toolroute: error: ")
    for needle in needles:
        assert needle in lines[0]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, captured.out, captured.err)


# ---- help ----------------------------------------------------------------------------------


def test_help_names_every_command_and_the_exit_codes() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    listed = re.findall(r"^    (\w+) +\w", proc.stdout, re.MULTILINE)  # each command with its one-line help
    assert listed == ["tools", "call", "serve", "users", "index", "bench"]
    documented = proc.stdout.partition("exit codes:")[2]
    codes = {value for name, value in vars(cli).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert codes and all(re.search(rf"(^|\s){code} [a-z]", documented) for code in codes), (codes, documented)


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("tools", ["--functions", "--mcp-servers", "--format", "--workspace", "--modules", "--mcp-config"]),
        ("call", ["--workspace", "--read-only-root", "--max-output-chars", "--timeout", "--trace", "--user-id"]),
        ("serve", ["--transport", "--host", "--port", "--functions", "--mcp-servers", "--workspace"]),
        ("bench", ["--benches", "--out", "--no-plot"]),
    ],
)
def test_each_command_explains_its_options(command: str, options: list[str]) -> None:
    proc = run_cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    for option in options:
        assert option in proc.stdout


def test_python_dash_m_is_the_same_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "toolroute", "call", "echo", '{"text": "m"}', *MOD],
        capture_output=True,
        text=True,
        env=tool_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "m\n"


# ---- tools ---------------------------------------------------------------------------------


def test_tools_prints_exactly_the_allowlist_as_openai_definitions() -> None:
    proc = run_cli("tools", "--functions", "add,echo", "--mcp-servers", "notes", *MOD)
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    assert names(tools) == ["add", "echo", "notes_shout"]
    add = tools[0]["function"]
    assert add["description"] == "Add two integers."
    assert add["parameters"]["required"] == ["a", "b"]
    assert add["parameters"]["properties"]["a"]["description"] == "first addend"


def test_tools_default_allowlist_is_the_builtin_tools() -> None:
    proc = run_cli("tools", *MOD)
    assert proc.returncode == 0, proc.stderr
    assert names(json.loads(proc.stdout)) == list(builtin_tools())


def test_tools_table_is_readable() -> None:
    proc = run_cli("tools", "--functions", "echo,fail", "--format", "table", *MOD)
    assert proc.returncode == 0, proc.stderr
    header, echo, fail = proc.stdout.strip().splitlines()
    assert header.split()[:3] == ["NAME", "KIND", "RO"]
    assert echo.split()[:5] == ["echo", "function", "yes", "text*,", "times"]
    assert "Repeat a text." in echo
    assert fail.split()[:3] == ["fail", "function", "no"]


@pytest.mark.parametrize(
    ("fmt", "check"),
    [
        (
            "responses",
            lambda t: (
                t
                == {
                    "type": "function",
                    "name": "echo",
                    "description": "Repeat a text.",
                    "parameters": t["parameters"],
                    "strict": False,  # `times` is optional: strict mode would make it required
                }
            ),
        ),
        ("anthropic", lambda t: t["name"] == "echo" and t["input_schema"]["required"] == ["text"]),
    ],
)
def test_tools_other_provider_formats(fmt: str, check) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli("tools", "--functions", "echo", "--format", fmt, *MOD)
    assert proc.returncode == 0, proc.stderr
    (tool,) = json.loads(proc.stdout)
    assert check(tool)


def test_tools_unknown_name_exits_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(
        run_main(["tools", "--functions", "echo,ecko", *MOD], capsys), EXIT_NOT_FOUND, "'ecko'", "echo"
    )


def test_tools_bad_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run_main(["tools", "--format", "yaml"], capsys), EXIT_USAGE, "--format")


# ---- call ----------------------------------------------------------------------------------


def test_call_prints_the_result_string() -> None:
    proc = run_cli("call", "echo", '{"text": "ab", "times": 3}', *MOD)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ababab\n", "")


def test_call_structured_result_is_json_text() -> None:
    proc = run_cli("call", "add", '{"a": 2, "b": 40}', *MOD)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"sum": 42}


def test_call_local_mcp_tool() -> None:
    proc = run_cli("call", "notes_shout", '{"text": "hey"}', *MOD)
    assert (proc.returncode, proc.stdout) == (0, "HEY\n")


def test_call_reads_arguments_from_stdin() -> None:
    proc = run_cli("call", "echo", "-", *MOD, stdin='{"text": "in"}')
    assert (proc.returncode, proc.stdout) == (0, "in\n")


def test_call_trace_prints_text_and_trace() -> None:
    proc = run_cli("call", "echo", '{"text": "t"}', "--trace", *MOD)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"text": "t", "trace": None}


@pytest.mark.parametrize(
    ("args", "code", "needles"),
    [
        (["call", "nope", "{}"], EXIT_NOT_FOUND, ["'nope'", "not found"]),
        (["call", "ecko", "{}"], EXIT_NOT_FOUND, ["did you mean", "'echo'"]),
        (["call", "echo", "{bad"], EXIT_USAGE, ["not valid JSON"]),
        (["call", "echo", "[1]"], EXIT_USAGE, ["must be a JSON object"]),
        (["call", "echo", '{"text": 5}'], EXIT_USAGE, ["text", "valid string"]),
        (["call", "echo", '{"text": "a", "extra": 1}'], EXIT_USAGE, ["extra"]),
        (["call", "fail", '{"reason": "boom"}'], EXIT_TOOL_FAILED, ["'fail' failed", "RuntimeError: boom"]),
        (["call", "refuse", '{"reason": "nope, not today"}'], EXIT_TOOL_FAILED, ["nope, not today"]),
        (["call", "too_slow", "{}"], EXIT_TIMEOUT, ["timed out"]),
        (["call", "echo", "{}", "--max-output-chars", "0"], EXIT_USAGE, ["max_output_chars"]),
        (["call", "echo", "{}", "--timeout", "-1"], EXIT_USAGE, ["command_timeout"]),
        (["call", "echo", "{}", "--max-output-chars", "many"], EXIT_USAGE, ["invalid int value"]),
        (["call"], EXIT_USAGE, ["NAME"]),
        (["frobnicate"], EXIT_USAGE, ["invalid choice"]),
    ],
)
def test_call_errors_are_one_line_with_distinct_exit_codes(
    args: list[str], code: int, needles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # In process (the same `main` the console script runs) to keep the matrix fast; the
    # subprocess test below covers each exit code through the installed entry point.
    assert_one_line_error(run_main([*args, *MOD], capsys), code, *needles)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["call", "echo", '{"text": 5}'], EXIT_USAGE),
        (["call", "nope", "{}"], EXIT_NOT_FOUND),
        (["call", "fail", '{"reason": "x"}'], EXIT_TOOL_FAILED),
        (["call", "too_slow", "{}"], EXIT_TIMEOUT),
    ],
)
def test_installed_entry_point_exit_codes(args: list[str], code: int) -> None:
    assert_one_line_error(run_cli(*args, *MOD), code)


def test_call_unknown_module_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(
        run_main(["call", "echo", "{}", "--modules", "no_such_module_xyz"], capsys), EXIT_USAGE, "no_such_module_xyz"
    )


def test_call_broken_tool_module_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken_tools_xyz.py").write_text("raise RuntimeError('half-written module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_main(["call", "echo", "{}", "--modules", "broken_tools_xyz"], capsys)
    assert_one_line_error(result, EXIT_USAGE, "broken_tools_xyz", "RuntimeError: half-written module")


def test_call_missing_workspace_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    assert_one_line_error(
        run_main(["call", "echo", "{}", "--workspace", str(missing), *MOD], capsys), EXIT_USAGE, "missing"
    )


def test_call_missing_mcp_config_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "servers.json"
    assert_one_line_error(
        run_main(["call", "echo", "{}", "--mcp-config", str(missing), *MOD], capsys), EXIT_USAGE, "servers.json"
    )


def test_call_builtin_is_confined_to_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hello from the workspace\n")
    (tmp_path / "secret.txt").write_text("TOP-SECRET-CONTENT\n")
    proc = run_cli("call", "read_file", '{"path": "hello.txt"}', "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert "hello from the workspace" in proc.stdout
    denied = run_cli("call", "read_file", '{"path": "../secret.txt"}', "--workspace", str(workspace))
    assert_one_line_error(denied, EXIT_USAGE)
    assert "TOP-SECRET-CONTENT" not in denied.stderr


def test_call_read_only_root_is_readable(tmp_path: Path) -> None:
    workspace, docs = tmp_path / "ws", tmp_path / "docs"
    workspace.mkdir()
    docs.mkdir()
    (docs / "ref.txt").write_text("reference text\n")
    args = json.dumps({"path": str(docs / "ref.txt")})
    proc = run_cli("call", "read_file", args, "--workspace", str(workspace), "--read-only-root", str(docs))
    assert proc.returncode == 0, proc.stderr
    assert "reference text" in proc.stdout


# ---- serve / bench usage errors -------------------------------------------------------------


def test_serve_refuses_to_start_without_an_allowlist(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run_main(["serve", *MOD], capsys), EXIT_USAGE, "explicit allowlist")


def test_serve_unknown_tool_in_allowlist_exits_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run_main(["serve", "--functions", "nope", *MOD], capsys), EXIT_NOT_FOUND, "'nope'")


def test_bench_without_report_script_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run_main(["bench", "--benches", str(tmp_path)], capsys), EXIT_USAGE, "report.py")


@pytest.mark.parametrize("cap", [None, 1000])
def test_max_output_chars_bounds_an_upstream_mcp_result_too(tmp_path: Path, cap: int | None) -> None:
    """One `--max-output-chars` for every tool: an upstream server's long result is cut so that
    it and the gateway's notice fit in it, as a built-in's text is; without it, the gateway's
    own 100,000-character bound applies."""
    from _mcp_helpers import demo_stdio

    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo_stdio("demo")}}))
    flags = [] if cap is None else ["--max-output-chars", str(cap)]
    text = "x" * 5000
    done = run_cli(
        "call", "echo", json.dumps({"text": text}), "--mcp-config", str(config), *flags, cwd=tmp_path, env=tool_env()
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.rstrip("\n")
    if cap is None:
        assert out == f"demo:{text}"
    else:
        body, notice = out.split("\n", 1)
        assert len(out) <= cap and len(body) > cap - 300 and body == f"demo:{text}"[: len(body)]
        assert notice.startswith(f"[... {5005 - len(body)} characters omitted of 5005;")
        assert f"at most {cap} characters" in notice


@pytest.mark.parametrize("command", ["tools", "serve"])
def test_a_config_file_passed_to_mcp_servers_is_named_as_such(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flag takes ids; the file belongs to --mcp-config, and the error says so (not that no
    gateway is attached)."""
    config = tmp_path / "servers.json"
    config.write_text('{"mcpServers": {}}')
    proc = run_main([command, "--mcp-servers", str(config), *MOD], capsys)
    assert_one_line_error(proc, EXIT_USAGE, f"--mcp-config {config}")


def test_serve_help_says_which_allowlist_flags_are_required() -> None:
    proc = run_cli("serve", "--help")
    assert proc.returncode == 0, proc.stderr
    help_text = " ".join(proc.stdout.split())
    assert "this, --mcp-servers or both is required" in help_text
    assert "the config file itself goes to --mcp-config" in help_text
