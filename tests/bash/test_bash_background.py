"""Background processes with real children: lifecycle, logs, stdin, kill, isolation, limits, cleanup."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from _bash_helpers import (
    bash_router,
    call,
    is_alive,
    killed_or_dying,
    live_in_groups,
    our_zombies,
    peak_rss,
    peak_rss_reset,
    unavailable,
    wait_ended,
    wait_for_file,
    wait_until,
)

from toolroute.builtins._process import ProcessTable
from toolroute.builtins.bash import RESOURCE_KEY, TOOL, BashRequest
from toolroute.context import BuiltInToolContext, ToolLimits
from toolroute.errors import ToolArgumentError, ToolExecutionError
from toolroute.router import ToolRouter
from toolroute.types import ToolResources, using_resources


def start(router: ToolRouter, command: str, **args: Any) -> str:
    snap = call(router, action="start", command=command, **args)
    assert snap["status"] in ("RUNNING", "EXITED")  # a quick command may be done already
    return snap["processId"]


def logs_until(router: ToolRouter, pid: str, text: str, **args: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def has_text() -> bool:
        seen.update(call(router, action="logs", process_id=pid, **args))
        return text in seen["stdout"]["content"]

    wait_until(has_text, f"{text!r} in the logs of {pid}")
    return seen


def test_start_returns_a_toolroute_id_and_status_tracks_the_process(bash: ToolRouter) -> None:
    snap = call(bash, action="start", command="echo hi; echo oops >&2; exit 4")
    assert snap["processId"].startswith("proc_") and snap["processId"] != str(snap["pid"])
    ended = wait_ended(bash, snap["processId"])
    assert ended["status"] == "EXITED"
    assert ended["exitCode"] == 4
    assert ended["endedAt"] is not None and ended["runtimeSeconds"] >= 0
    logs = call(bash, action="logs", process_id=snap["processId"], offset=0)
    assert logs["stdout"]["content"] == "hi\n"
    assert logs["stderr"]["content"] == "oops\n"
    assert logs["exitCode"] == 4


def test_stdin_write_round_trip(bash: ToolRouter) -> None:
    pid = start(bash, 'while read -r line; do echo "got:$line"; done; echo eof')
    first = call(bash, action="write", process_id=pid, input="one\n")
    assert first["bytesWritten"] == 4
    logs = logs_until(bash, pid, "got:one", offset=0)
    cursor = logs["stdout"]["nextOffset"]
    call(bash, action="write", processId=pid, input="two\n", closeStdin=True)  # AI4J-style names
    ended = wait_ended(bash, pid)
    assert ended["status"] == "EXITED" and ended["exitCode"] == 0 and ended["stdinOpen"] is False
    rest = call(bash, action="logs", process_id=pid, offset=cursor)
    assert rest["stdout"]["content"] == "got:two\neof\n"
    assert rest["stdout"]["offset"] == cursor and rest["stdout"]["more"] is False


def test_start_with_initial_input(bash: ToolRouter) -> None:
    pid = start(bash, "tr a-z A-Z", input="shout\n", close_stdin=True)
    wait_ended(bash, pid)
    assert call(bash, action="logs", process_id=pid, offset=0)["stdout"]["content"] == "SHOUT\n"


def test_logs_poll_with_a_cursor_and_default_to_the_tail(bash: ToolRouter) -> None:
    pid = start(bash, "seq 1 1000")
    wait_ended(bash, pid)
    full = "".join(f"{i}\n" for i in range(1, 1001))
    tail = call(bash, action="logs", process_id=pid, limit=10, stream="stdout")
    assert tail["stdout"]["content"] == full[-10:]
    assert "stderr" not in tail
    pieces, cursor = [], 0
    while True:
        chunk = call(bash, action="logs", process_id=pid, offset=cursor, limit=700, stream="stdout")["stdout"]
        pieces.append(chunk["content"])
        cursor = chunk["nextOffset"]
        if not chunk["more"]:
            break
    assert "".join(pieces) == full
    assert len(pieces) == -(-len(full) // 700)


def test_a_chatty_process_is_bounded_by_the_ring_buffer(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(log_buffer_bytes=1000)) as router:
        pid = start(router, "seq 1 10000")
        wait_ended(router, pid)
        logs = call(router, action="logs", process_id=pid, offset=0, stream="stdout")["stdout"]
        status = call(router, action="status", process_id=pid)
    total = len("".join(f"{i}\n" for i in range(1, 10001)))
    assert status["stdoutBytes"] == total
    assert logs["truncated"] is True
    assert logs["offset"] == total - 1000 == logs["droppedBytes"]
    assert logs["content"].endswith("9999\n10000\n") and len(logs["content"]) == 1000


def test_a_big_stream_keeps_memory_bounded(bash: ToolRouter) -> None:
    # 256 MiB, not 1 GiB: background output is read at a paced rate (about 50 MiB/s at most, see
    # pump.READ_INTERVAL), so the command takes seconds; exec's test streams 1 GiB unpaced.
    size = 256 << 20
    before = peak_rss_reset()
    pid = start(bash, f"head -c {size} /dev/zero; echo done >&2")
    ended = wait_ended(bash, pid)
    grown_mib = (peak_rss() - before) / 1024
    assert ended["stdoutBytes"] == size
    assert grown_mib < 64, f"peak RSS grew by {grown_mib:.0f} MiB for a 256 MiB stream"
    logs = call(bash, action="logs", process_id=pid, offset=0)
    assert logs["stdout"]["truncated"] is True
    assert logs["stdout"]["offset"] == size - ToolLimits().log_buffer_bytes
    assert logs["stderr"]["content"] == "done\n"


def test_stop_kills_a_process_that_ignores_sigterm(bash: ToolRouter, ws: Path) -> None:
    pid = start(bash, "trap '' TERM; echo $$ > pid; while :; do sleep 1; done")
    shell = int(wait_for_file(ws / "pid"))
    stopped = call(bash, action="stop", process_id=pid)
    assert stopped["status"] == "STOPPED"
    assert stopped["signal"] == "SIGKILL" and stopped["exitCode"] == 137
    assert not is_alive(shell)


def test_stop_kills_a_grandchild_that_outlived_its_parent(bash: ToolRouter, ws: Path) -> None:
    pid = start(bash, "bash -c 'sleep 300 & echo $! > grandchild'; sleep 300")
    grandchild = int(wait_for_file(ws / "grandchild"))
    assert is_alive(grandchild)
    assert call(bash, action="stop", process_id=pid)["status"] == "STOPPED"
    assert not is_alive(grandchild)


def test_stop_is_idempotent(bash: ToolRouter) -> None:
    pid = start(bash, "sleep 300")
    first = call(bash, action="stop", process_id=pid)
    again = call(bash, action="stop", process_id=pid)
    assert first["status"] == again["status"] == "STOPPED"
    assert first["exitCode"] == again["exitCode"] == 143


def test_what_a_background_shell_leaves_behind_is_ended_with_it(bash: ToolRouter, ws: Path) -> None:
    pid = start(bash, "sleep 300 & echo $! > leftover")
    leftover = int(wait_for_file(ws / "leftover"))
    assert wait_ended(bash, pid)["status"] == "EXITED"
    assert not is_alive(leftover)


def test_processes_are_invisible_to_another_workspace(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    router = ToolRouter()
    ctx_a, ctx_b = BuiltInToolContext(a), BuiltInToolContext(b)
    try:
        pid = call_in(router, ctx_a, action="start", command="cat")["processId"]
        assert call_in(router, ctx_b, action="list") == {"processes": []}
        for action in ("status", "logs", "stop", "write"):
            with pytest.raises(ToolArgumentError, match="unknown process_id"):
                call_in(router, ctx_b, action=action, process_id=pid, input="x")
        # The owner still sees it, running and untouched.
        listed = call_in(router, ctx_a, action="list")["processes"]
        assert [p["processId"] for p in listed] == [pid] and listed[0]["status"] == "RUNNING"
    finally:
        router.close()


def test_processes_are_invisible_to_another_user_of_the_same_workspace(ws: Path) -> None:
    router = ToolRouter()
    alice, bob = BuiltInToolContext(ws, user_id="alice"), BuiltInToolContext(ws, user_id="bob")
    try:
        pid = call_in(router, alice, action="start", command="sleep 300")["processId"]
        assert call_in(router, bob, action="list") == {"processes": []}
        with pytest.raises(ToolArgumentError, match="unknown process_id"):
            call_in(router, bob, action="stop", process_id=pid)
        same_owner_again = BuiltInToolContext(ws, user_id="alice")  # a new but equal context
        assert call_in(router, same_owner_again, action="status", process_id=pid)["status"] == "RUNNING"
    finally:
        router.close()


def call_in(router: ToolRouter, ctx: BuiltInToolContext, **args: Any) -> dict[str, Any]:
    from toolroute.context import builtin_tool_context

    with builtin_tool_context(ctx):
        return call(router, **args)


def test_the_concurrency_limit(ws: Path) -> None:
    with bash_router(ws, limits=ToolLimits(max_background_processes=2)) as router:
        first = start(router, "sleep 300")
        start(router, "sleep 300")
        with pytest.raises(ToolExecutionError, match=r"too many background processes: 2 of 2 are running"):
            call(router, action="start", command="sleep 300")
        call(router, action="stop", process_id=first)
        third = start(router, "sleep 300")  # an ended process no longer counts
        listed = call(router, action="list")["processes"]
        assert [p["status"] for p in listed] == ["STOPPED", "RUNNING", "RUNNING"]
        assert listed[-1]["processId"] == third


def test_the_limit_is_per_owner(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    router = ToolRouter()
    limits = ToolLimits(max_background_processes=1)
    try:
        call_in(router, BuiltInToolContext(a, limits=limits), action="start", command="sleep 300")
        call_in(router, BuiltInToolContext(b, limits=limits), action="start", command="sleep 300")
    finally:
        router.close()


def test_nothing_is_left_behind_after_the_router_closes(ws: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(ws))
    commands = {  # command: how many processes it becomes (bash execs a lone last command)
        "sleep 300": 1,
        "trap '' TERM; while :; do sleep 1; done": 2,
        "bash -c 'sleep 300 & echo started'; sleep 300": 2,  # one of them reparented to init
        "(trap '' TERM; sleep 300) & wait": 2,
        "cat": 1,
    }
    groups = {call(router, action="start", command=c)["pid"] for c in commands}
    expected = sum(commands.values())
    wait_until(lambda: len(live_in_groups(groups)) == expected, "the commands' processes to start")
    router.close()
    assert live_in_groups(groups) == []
    assert our_zombies() == []


def test_a_dropped_router_ends_its_processes(ws: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(ws))
    group = call(router, action="start", command="sleep 300")["pid"]
    del router
    gc.collect()
    wait_until(lambda: not live_in_groups({group}), "the dropped router's process to end")
    assert our_zombies() == []


def test_every_process_ends_at_interpreter_exit_without_close(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = textwrap.dedent(
        f"""
        import json
        from toolroute.context import BuiltInToolContext
        from toolroute.router import ToolRouter
        from toolroute.builtins.bash import TOOL, BashRequest
        ctx = BuiltInToolContext({str(ws)!r})
        router = ToolRouter(context=ctx)  # never closed
        pids = [json.loads(router.invoke("bash", {{"action": "start", "command": c}}))["pid"]
                for c in ("sleep 300", "trap '' TERM; sleep 300 & wait")]
        # And without any router: the module-wide table.
        out = TOOL.handler(BashRequest(action="start", command="sleep 300"), ctx)
        pids.append(json.loads(out.text)["pid"])
        # And an exec still running in a daemon thread when the interpreter exits.
        import os, threading, time
        pid_file = os.path.join({str(ws)!r}, "exec.pid")
        threading.Thread(target=router.invoke, args=("bash", {{"command": f"echo $$ > {{pid_file}}; sleep 300"}}),
                         daemon=True).start()
        while not (os.path.exists(pid_file) and open(pid_file).read().strip()):
            time.sleep(0.01)
        pids.append(int(open(pid_file).read()))
        print(json.dumps(pids), flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    groups = set(__import__("json").loads(done.stdout))
    assert len(groups) == 4
    assert live_in_groups(groups) == []


def test_async_execution_through_the_router(bash: ToolRouter) -> None:
    async def scenario() -> tuple[str, str]:
        import json

        snap = json.loads(await bash.ainvoke("bash", {"action": "start", "command": "cat"}))
        await bash.ainvoke("bash", {"action": "write", "process_id": snap["processId"], "input": "async\n"})
        await bash.ainvoke("bash", {"action": "write", "process_id": snap["processId"], "close_stdin": True})
        await anyio.to_thread.run_sync(lambda: wait_ended(bash, snap["processId"]))
        logs = json.loads(await bash.ainvoke("bash", {"action": "logs", "process_id": snap["processId"], "offset": 0}))
        other = json.loads(await bash.ainvoke("bash", {"command": "echo exec"}))
        return logs["stdout"]["content"], other["stdout"]

    assert anyio.run(scenario) == ("async\n", "exec\n")


def test_each_router_has_its_own_table(ws: Path) -> None:
    with bash_router(ws) as one, bash_router(ws) as two:
        pid = start(one, "sleep 300")
        assert call(two, action="list") == {"processes": []}
        with pytest.raises(ToolArgumentError, match="unknown process_id"):
            call(two, action="stop", process_id=pid)


def test_closing_the_router_ends_a_running_exec(ws: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(ws))
    result: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: result.update(call(router, command="echo $$ > pid; sleep 300", timeout=600))
    )
    worker.start()
    shell = int(wait_for_file(ws / "pid"))
    router.close()
    worker.join(60)
    assert not worker.is_alive()
    assert result["timedOut"] is False and result["signal"] == "SIGTERM"
    assert any("router was closed" in note for note in result["notes"])
    assert not live_in_groups({shell})


def test_an_exec_that_reaches_its_table_after_the_router_closed_is_ended(ws: Path) -> None:
    """The interleaving that made the test above flaky under load: the exec passed the router's
    open check and spawned its shell, and the router closed before the exec asked for its table
    (made on first use). The table made then is closed as it is made, so the exec is ended."""
    resources = ToolResources()
    resources.seal()  # the router's close, with no table made yet
    with using_resources(resources):
        out = TOOL.handler(BashRequest(command="sleep 300", timeout=600), BuiltInToolContext(ws))
    result = json.loads(out.text)
    assert result["signal"] == "SIGTERM" and result["timedOut"] is False
    assert any("router was closed" in note for note in result["notes"])
    assert resources.get(RESOURCE_KEY, ProcessTable).running_count() == 0


def test_ended_processes_are_kept_only_up_to_a_bound(bash: ToolRouter) -> None:
    from toolroute.builtins._process.table import RETAIN_FINISHED

    ids = []
    for _ in range(RETAIN_FINISHED + 8):
        ids.append(start(bash, "true"))
        wait_ended(bash, ids[-1])
    listed = [p["processId"] for p in call(bash, action="list")["processes"]]
    assert listed == ids[-RETAIN_FINISHED:]  # the oldest ended ones were dropped, in order
    with pytest.raises(ToolArgumentError, match="unknown process_id"):
        call(bash, action="status", process_id=ids[0])


SANDBOXES = ("off", "bubblewrap", "landlock")


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_process_outlives_the_thread_that_started_it(ws: Path, sandbox: str) -> None:
    """The parent-death signal (Landlock's helper, bubblewrap's --die-with-parent) follows the
    thread that forked a child: a process started by a worker thread that then ended was
    SIGKILLed with it (served mode sheds idle workers). Every spawn goes through the launcher."""
    from toolroute.builtins._process.sandbox import bwrap_path, landlock_abi

    probe = {"bubblewrap": bwrap_path, "landlock": landlock_abi}.get(sandbox)
    why = None if probe is None else unavailable(probe)
    if why:
        pytest.skip(why)
    with bash_router(ws, sandbox=sandbox) as router:
        started: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: started.update(call(router, action="start", command="sleep 30")))
        worker.start()
        worker.join()
        assert not worker.is_alive()
        # A parent-death signal is sent as the thread's task exits, before it leaves /proc (join
        # returns earlier): once it has left, the process is killed, dying, or never signalled.
        wait_until(lambda: not Path(f"/proc/self/task/{worker.native_id}").exists(), "the worker's task to exit")
        assert not killed_or_dying(started["pid"]), "the process died with the thread that started it"
        snap = call(router, action="status", process_id=started["processId"])
        assert snap["status"] == "RUNNING", snap
        assert call(router, action="stop", process_id=started["processId"])["status"] == "STOPPED"
    threads = [t.name for t in threading.enumerate() if t.name == "toolroute-launcher"]
    assert threads == ["toolroute-launcher"]  # one launcher, whatever the number of callers


def test_ended_processes_output_stays_within_the_owners_budget(ws: Path) -> None:
    """An owner's ended processes keep their output only as far as its budget (its running
    processes' worth of buffers): older ones' output is released, oldest first, and says so;
    their status stays."""
    limits = ToolLimits(log_buffer_bytes=64 << 10, max_background_processes=2)
    with bash_router(ws, limits=limits) as router:
        ids = []
        for n in range(6):
            pid = start(router, f"head -c {100 << 10} /dev/zero | tr '\\0' '{n}'")
            wait_ended(router, pid)
            ids.append(pid)
        table = router.resources.get(RESOURCE_KEY, ProcessTable)
        held = sum(p.buffered for p in table.all())
        assert held <= 2 * 2 * (64 << 10), held
        oldest, newest = (call(router, action="status", process_id=i) for i in (ids[0], ids[-1]))
    assert "memory budget" in oldest["outputReleased"] and "outputReleased" not in newest
    assert oldest["status"] == "EXITED" and oldest["stdoutBytes"] == 100 << 10  # its status stays
    assert newest["endedBecause"] == "it exited by itself"


def test_the_tables_budget_is_shared_by_every_owner(tmp_path: Path) -> None:
    """What all owners' processes may hold is bounded too (a served server's every tenant): a
    start that would pass it is refused with the reason, whoever asks."""
    table = ProcessTable(max_buffer_bytes=4 * 2 * (64 << 10))  # four processes' buffers
    limits = ToolLimits(log_buffer_bytes=64 << 10, max_background_processes=8)
    routers = []
    try:
        started = 0
        for owner in ("alice", "bob", "carol"):
            (tmp_path / owner).mkdir()
            router = ToolRouter(context=BuiltInToolContext(tmp_path / owner, limits=limits))
            router.resources.get(RESOURCE_KEY, lambda: table)
            routers.append(router)
            for _ in range(2):
                try:
                    call(router, action="start", command="sleep 30")
                    started += 1
                except ToolExecutionError as exc:
                    assert "hold what their output may" in str(exc)
        assert started == 4
    finally:
        for router in routers:
            router.close()


def test_why_a_process_ended_is_reported(bash: ToolRouter) -> None:
    stopped = start(bash, "sleep 30")
    assert call(bash, action="stop", process_id=stopped)["endedBecause"] == "it was stopped on request (action=stop)"
    killed = start(bash, "kill -9 $$")
    assert wait_ended(bash, killed)["endedBecause"] == "it was killed by SIGKILL, not by toolroute"
    table = bash.resources.get(RESOURCE_KEY, ProcessTable)
    running = start(bash, "sleep 30")
    table.close()
    assert table.get(next(iter(p.owner for p in table.all())), running).snapshot()["endedBecause"] == (
        "its router was closed, or the server is shutting down"
    )
