"""bash action=exec with real processes: exit codes, capture, caps, timeouts, cwd, environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _bash_helpers import (
    bash_router,
    call,
    call_text,
    is_alive,
    live_in_groups,
    our_zombies,
    peak_rss,
    peak_rss_reset,
    wait_ended,
    wait_for_file,
    wait_until,
)

from toolroute.context import BuiltInToolContext, ToolLimits, builtin_tool_context
from toolroute.errors import ToolArgumentError
from toolroute.router import ToolRouter


def test_exit_code_stdout_and_stderr_are_captured_separately(bash: ToolRouter) -> None:
    out = call(bash, action="exec", command="echo out; echo err >&2; exit 7")
    assert out["exitCode"] == 7
    assert out["stdout"] == "out\n"
    assert out["stderr"] == "err\n"
    assert out["timedOut"] is False
    assert out["signal"] is None


def test_action_defaults_to_exec_and_runs_bash_not_sh(bash: ToolRouter) -> None:
    out = call(bash, command='[[ -n "$BASH_VERSION" ]] && echo "${BASH_VERSINFO[0]}"')
    assert out["exitCode"] == 0
    assert out["stdout"].strip().isdigit()


def test_a_signal_is_reported_as_128_plus_its_number(bash: ToolRouter) -> None:
    out = call(bash, command="kill -USR1 $$")
    assert out["exitCode"] == 128 + signal.SIGUSR1
    assert out["signal"] == "SIGUSR1"


def test_works_through_the_builtin_context_stack_too(ws: Path) -> None:
    router = ToolRouter()
    try:
        with builtin_tool_context(BuiltInToolContext(ws)):
            text = router.invoke("bash", json.dumps({"action": "exec", "command": "pwd"}))
        assert json.loads(text)["stdout"].strip() == str(ws.resolve())
    finally:
        router.close()


def test_output_over_the_limit_keeps_head_and_tail_with_a_marker(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(max_output_chars=1000)) as router:
        raw = call_text(router, command="seq 1 100000")
    out = json.loads(raw)
    full = "".join(f"{i}\n" for i in range(1, 100001))
    assert len(raw) <= 1000
    assert out["stdoutBytes"] == len(full)
    text = out["stdout"]
    head, marker_and_tail = text.split("\n[... ", 1)
    marker, tail = marker_and_tail.split(" ...]\n", 1)
    assert full.startswith(head) and 100 <= len(head) <= 500
    assert full.endswith(tail) and 100 <= len(tail) <= 500
    omitted = len(full) - len(head) - len(tail)
    assert marker.startswith(f"{omitted} bytes omitted of {len(full)}")


def test_stdout_and_stderr_share_the_output_budget(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(max_output_chars=1000)) as router:
        small_err = call(router, command="head -c 5000 /dev/zero | tr '\\0' Q; echo tiny >&2")
        both_big = call(router, command="head -c 5000 /dev/zero | tr '\\0' Q; head -c 5000 /dev/zero | tr '\\0' Z >&2")
    assert small_err["stderr"] == "tiny\n"
    assert small_err["stdout"].count("Q") > 2 * both_big["stdout"].count("Q") - 50  # it got stderr's share too
    q, z = both_big["stdout"].count("Q"), both_big["stderr"].count("Z")
    assert abs(q - z) <= 1 and q > 100  # equal halves of an odd budget differ by one


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("numbers", "seq 1 100000"),
        ("quotes", "head -c 100000 /dev/zero | tr '\\0' '\"'"),
        ("escape bytes", "head -c 100000 /dev/zero | tr '\\0' '\\033'"),
        ("backslashes on stderr", "head -c 100000 /dev/zero | tr '\\0' '\\\\' >&2"),
        ("both streams", "seq 1 50000; head -c 50000 /dev/zero | tr '\\0' '\\001' >&2"),
    ],
)
def test_max_output_chars_bounds_the_text_the_model_receives(ws: Path, name: str, command: str) -> None:
    """Issue 14 item 13: the cap counts characters of the returned text, after JSON escaping."""
    with bash_router(ws) as router:  # the default cap, 30,000
        raw = call_text(router, command=command)
    out = json.loads(raw)
    assert len(raw) <= 30_000, name
    assert out["stdoutBytes"] + out["stderrBytes"] >= 100_000
    shown = out["stdout"] + out["stderr"]
    assert shown.count("bytes omitted of") == (out["stdoutBytes"] > 0) + (out["stderrBytes"] > 0) - (
        out["stdoutBytes"] + out["stderrBytes"] <= 30_000
    )
    assert len(shown) > 1000  # still shows a useful amount, not just the marker


def test_logs_are_bounded_after_escaping_too(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(max_output_chars=2000)) as router:
        pid = call(router, action="start", command="head -c 50000 /dev/zero | tr '\\0' '\\033'")["processId"]
        wait_ended(router, pid)
        raw = call_text(router, action="logs", process_id=pid, offset=0)
    out = json.loads(raw)
    assert len(raw) <= 2000
    assert 100 < len(out["stdout"]["content"]) == out["stdout"]["nextOffset"]  # continue from where it stopped


def test_a_long_command_is_not_repeated_in_full(ws: Path) -> None:
    command = "true " + "#" * 50_000
    with bash_router(ws, limits=ToolLimits(max_output_chars=5000)) as router:
        raw = call_text(router, command=command)
    assert len(raw) <= 5000 and json.loads(raw)["exitCode"] == 0


def test_a_cut_never_splits_a_utf8_character(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(max_output_chars=700)) as router:
        out = call(router, command="for i in $(seq 1 2000); do printf 'é'; done")
    assert "\ufffd" not in out["stdout"]
    assert out["stdout"].startswith("é" * 20)
    assert out["stdout"].endswith("é" * 20)


def test_output_of_1gb_keeps_memory_bounded(bash: ToolRouter) -> None:
    before = peak_rss_reset()
    out = call(bash, command="head -c 1G /dev/zero")
    grown_mib = (peak_rss() - before) / 1024
    assert out["exitCode"] == 0
    assert out["stdoutBytes"] == 1 << 30
    assert len(out["stdout"]) < 31_000
    assert grown_mib < 64, f"peak RSS grew by {grown_mib:.0f} MiB while capturing 1 GiB"


def test_timeout_kills_a_command_that_ignores_sigterm(bash: ToolRouter, ws: Path) -> None:
    out = call(bash, command="trap '' TERM; echo $$ > pid; sleep 60; echo not reached", timeout=2)
    assert out["timedOut"] is True
    assert out["signal"] == "SIGKILL"
    assert "not reached" not in out["stdout"]
    assert "action=start" in out["notes"][0]
    pid = int((ws / "pid").read_text())
    assert not is_alive(pid)


def test_timeout_kills_a_grandchild_that_outlived_its_parent(bash: ToolRouter, ws: Path) -> None:
    # The inner shell forks `sleep` and exits at once; the grandchild is reparented but stays in the
    # command's process group, holding the pipes. Killing only the shell would hang (codex#4337).
    command = "bash -c 'sleep 300 & echo $! > grandchild'; sleep 300"
    out = call(bash, command=command, timeout=2)
    assert out["timedOut"] is True
    grandchild = int(wait_for_file(ws / "grandchild"))
    assert not is_alive(grandchild)


def test_a_background_leftover_of_a_finished_command_is_ended_not_waited_for(bash: ToolRouter, ws: Path) -> None:
    out = call(bash, command="sleep 300 & echo $! > leftover; echo done", timeout=60)
    assert out["timedOut"] is False
    assert out["exitCode"] == 0 and out["stdout"] == "done\n"
    assert any("left processes" in note for note in out["notes"])
    assert not is_alive(int((ws / "leftover").read_text()))


def test_no_process_or_zombie_is_left_after_exec(bash: ToolRouter, ws: Path) -> None:
    out = call(bash, command="echo $$ > sid; (sleep 300 &); sleep 300 & wait", timeout=2)
    assert out["timedOut"] is True
    group = int((ws / "sid").read_text())
    wait_until(lambda: not live_in_groups({group}), "the command's group to be empty")
    assert our_zombies() == []


def test_timeout_is_capped_at_the_context_maximum(ws: Path) -> None:
    limits = ToolLimits(command_timeout=0.3, max_command_timeout=0.5)
    with bash_router(ws, limits=limits) as router:
        out = call(router, command="sleep 30", timeout=1000)
    assert out["timedOut"] is True
    assert any("lowered to the maximum of 0.5 s" in note for note in out["notes"])


def test_ai4j_timeout_ms_alias_and_defaults(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(command_timeout=30)) as router:
        fast = call(router, action="exec", command="sleep 30", timeoutMs=300)
        # AI4J's all-fields-required form: blank and zero fields mean "unset".
        filled = call(
            router,
            action="exec",
            command="echo ok",
            cwd="",
            timeoutMs=0,
            processId="",
            offset=0,
            limit=0,
            input="",
        )
    assert fast["timedOut"] is True
    assert filled["exitCode"] == 0 and filled["stdout"] == "ok\n"


def test_stdin_is_closed_unless_input_is_given(bash: ToolRouter) -> None:
    # `cat` would hang forever on an inherited terminal or open pipe.
    assert call(bash, command="cat; echo rc=$?", timeout=10)["stdout"] == "rc=0\n"
    given = call(bash, command="tr a-z A-Z", input="hello\n")
    assert given["stdout"] == "HELLO\n"


def test_large_input_is_fed_without_deadlock(bash: ToolRouter) -> None:
    data = "x" * 1_000_000 + "\n"
    out = call(bash, command="wc -c", input=data, timeout=30)
    assert out["stdout"].strip() == str(len(data))


def test_no_controlling_terminal(bash: ToolRouter) -> None:
    out = call(bash, command="cat /dev/tty; echo rc=$?")
    assert "rc=1" in out["stdout"]
    assert "No such device or address" in out["stderr"]


def test_no_controlling_terminal_even_when_the_host_has_one(tmp_path: Path) -> None:
    """A host started from a terminal: the command must still not reach that terminal."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = textwrap.dedent(
        f"""
        import json, os
        os.close(os.open(os.ttyname(0), os.O_RDWR))  # a session leader opening a tty acquires it
        os.close(os.open("/dev/tty", os.O_RDONLY))  # the host now has a controlling terminal
        from toolroute.context import BuiltInToolContext
        from toolroute.router import ToolRouter
        with ToolRouter(context=BuiltInToolContext({str(ws)!r})) as router:
            out = json.loads(router.invoke("bash", {{"command": "cat /dev/tty; echo rc=$?", "timeout": 10}}))
        with open({str(tmp_path / "result.json")!r}, "w") as f:
            json.dump(out, f)
        """
    )
    leader, follower = os.openpty()
    try:
        host = subprocess.Popen(
            [sys.executable, "-c", script], stdin=follower, stdout=follower, stderr=follower, start_new_session=True
        )
        os.close(follower)
        follower = -1
        transcript = b""
        while True:  # drain the terminal so the host never blocks writing to it
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every holder of the follower side is gone
                break
            if not chunk:
                break
            transcript += chunk
        assert host.wait(timeout=60) == 0, transcript.decode(errors="replace")
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    out = json.loads((tmp_path / "result.json").read_text())
    assert out["stdout"] == "rc=1\n" and "No such device or address" in out["stderr"]


def test_the_command_leads_its_own_process_group(bash: ToolRouter) -> None:
    out = call(bash, command="ps -o pgid= -p $$; echo $$")
    pgid, pid = out["stdout"].split()
    assert pgid == pid
    assert int(pgid) != os.getpgrp()


def test_non_interactive_environment_is_set(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TOOLROUTE_TEST_VAR", "inherited")
    with bash_router(ws, env_allowlist=("*",)) as router:
        out = call(router, command='echo "$PAGER|$GIT_PAGER|$NO_COLOR|$TERM|${COLORTERM-unset}|$TOOLROUTE_TEST_VAR"')
    assert out["stdout"] == "cat|cat|1|dumb|unset|inherited\n"


def test_a_host_api_sets_variables_per_call_unseen_by_models(bash: ToolRouter) -> None:
    """`env` (a host API's per-call environment, e.g. an Agents SDK manifest's) is set for the
    command on top of the context's; the schema models see does not offer it; bad names fail."""
    out = call(bash, command='echo "$GREETING|$PAGER"', env={"GREETING": "hi there", "PAGER": "less"})
    assert out["stdout"] == "hi there|cat\n"  # NON_INTERACTIVE still wins: no pager waits
    schema = bash.get_all_tools(["bash"], [])[0]["function"]["parameters"]
    assert "env" not in schema["properties"]
    for bad in ({"A=B": "x"}, {"": "x"}, {"A": "x\0y"}):
        with pytest.raises(ToolArgumentError, match="cannot be an environment variable"):
            bash.execute("bash", {"command": "true", "env": bad})


def test_secrets_are_not_passed_by_default(bash: ToolRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("LC_TOOLROUTE", "C.UTF-8")
    out = call(bash, command='env; echo "PATH=${PATH:+set}"')
    assert "sk-test-secret" not in out["stdout"] and "aws-secret" not in out["stdout"]
    assert "LC_TOOLROUTE=C.UTF-8" in out["stdout"]  # the default allowlist keeps locale patterns
    assert "PATH=set" in out["stdout"]


def test_a_named_secret_is_passed(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolroute.builtins._process.environment import DEFAULT_ENV_ALLOWLIST

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    with bash_router(ws, env_allowlist=(*DEFAULT_ENV_ALLOWLIST, "OPENAI_*")) as router:
        out = call(router, command='echo "${OPENAI_API_KEY-none}|${AWS_SECRET_ACCESS_KEY-none}"')
    assert out["stdout"] == "sk-test-secret|none\n"


def test_env_allowlist_passes_only_the_listed_variables(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLROUTE_SECRET", "s3cret")
    monkeypatch.setenv("TOOLROUTE_KEPT", "kept")
    with bash_router(ws, env_allowlist=("PATH", "TOOLROUTE_KEPT")) as router:
        out = call(router, command='echo "${TOOLROUTE_SECRET-none}|$TOOLROUTE_KEPT|$PAGER"; env | grep -c HOME=')
    assert out["stdout"].splitlines() == ["none|kept|cat", "0"]


def test_cwd_defaults_to_the_workspace_and_accepts_relative_paths(bash: ToolRouter, ws: Path) -> None:
    (ws / "sub" / "dir").mkdir(parents=True)
    assert call(bash, command="pwd")["stdout"].strip() == str(ws.resolve())
    out = call(bash, command="pwd", cwd="sub/dir")
    assert out["stdout"].strip() == str((ws / "sub" / "dir").resolve())
    assert out["workingDirectory"] == str((ws / "sub" / "dir").resolve())


def test_cwd_may_be_a_read_only_root(ws: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "doc.txt").write_text("reference\n")
    with bash_router(ws, read_only_roots=(ro,)) as router:
        out = call(router, command="cat doc.txt", cwd=str(ro))
    assert out["stdout"] == "reference\n"


def test_a_process_that_leaves_the_group_does_not_hang_exec(bash: ToolRouter, ws: Path) -> None:
    # `setsid` moves the child out of the command's group (documented as not confined); it still
    # holds the output pipe, so exec must stop waiting for it instead of hanging until it exits.
    out = call(bash, command="setsid sleep 300 & echo $! > escaped; echo done", timeout=120)
    escaped = int((ws / "escaped").read_text())
    try:
        assert out["timedOut"] is False
        assert out["exitCode"] == 0 and out["stdout"] == "done\n"
    finally:
        os.kill(escaped, signal.SIGKILL)


def test_parallel_execs_from_many_threads_stay_separate(bash: ToolRouter) -> None:
    def run(i: int) -> list[str]:
        return [call(bash, command=f"echo {i}-{j}; echo e{i}-{j} >&2")["stdout"] for j in range(5)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, range(8)))
    assert results == [[f"{i}-{j}\n" for j in range(5)] for i in range(8)]
    assert our_zombies() == []


def test_cancelling_an_async_exec_ends_its_process_group(bash: ToolRouter, ws: Path) -> None:
    """`router.arun` runs bash on a worker thread; cancelling the caller must reach the command.
    Bounded without the fix too: the command's own timeout (30 s) ends it late, and that fails."""
    import time

    import anyio

    pid_file = ws / "child.pid"
    command = f"sleep 600 & echo $! > {pid_file}; wait"
    cancelled_at: list[float] = []

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(bash.arun, bash.resolve("bash"), {"command": command, "timeout": 30})
            await anyio.to_thread.run_sync(wait_for_file, pid_file)
            cancelled_at.append(time.monotonic())
            tg.cancel_scope.cancel()

    anyio.run(go)
    assert time.monotonic() - cancelled_at[0] < 10, "the cancelled call waited for its command"
    child = int(pid_file.read_text())
    wait_until(lambda: not is_alive(child), "the cancelled command's child to end", timeout=10)
