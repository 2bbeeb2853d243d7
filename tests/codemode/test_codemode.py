"""Code mode (issue 47): one tool whose input is a program that calls the request's tools through
the router. Real programs in real interpreter processes, under the real sandboxes, calling real
built-ins, a function tool and a real MCP server over stdio; the results are held against the
same calls made one by one through `invoke` (docs/code_mode.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _bash_helpers import is_alive, sandbox_kinds, wait_until
from _mcp_helpers import demo_stdio

from toolroute import BuiltInToolContext, ToolLimits, ToolRouter, function_tool
from toolroute.codemode import CodeMode
from toolroute.exposure import Exposure
from toolroute.mcp import McpGateway


@function_tool(name="scale", description="Multiply a number by a factor.")
def scale(value: float, factor: float = 2.0) -> dict[str, float]:
    return {"value": value * factor}


@function_tool(name="secret_tool", description="Registered, never listed to the request.")
def secret_tool() -> str:
    return "the secret ran"


@pytest.fixture
def workspace(deployed: Path) -> Path:
    root = deployed / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta needle\ngamma\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("needle = 1\n")
    return root


def make_router(workspace: Path, *, sandbox: str = "off", gateway: McpGateway | None = None, **kw: Any) -> ToolRouter:
    limits = kw.pop("limits", ToolLimits())
    context = BuiltInToolContext(workspace, sandbox=sandbox, limits=limits)  # type: ignore[arg-type]
    router = ToolRouter(context=context, gateway=gateway, **kw)
    router.register(scale)
    router.register(secret_tool)
    return router


@pytest.fixture
def gateway(deployed: Path) -> Iterator[McpGateway]:
    (deployed / "mcp.json").write_text(json.dumps({"mcpServers": {"calc": demo_stdio("calc")}}))
    yield McpGateway.from_file(deployed / "mcp.json", eager=True)


def run(router: ToolRouter, exposure: Exposure, code: str, **extra: Any) -> Any:
    return router.run(exposure.get("run_code"), {"code": code, **extra})  # type: ignore[arg-type]


def as_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


FIVE_CALLS = """
import json, threading
from tools import read_file, grep, scale
results = {}
results["read_file"] = read_file(path="notes.txt")
results["grep"] = grep(pattern="needle")
results["scale"] = scale(value=4, factor=3)
def parallel(key, name, arguments):
    results[key] = tools.call(name, **arguments)
threads = [
    threading.Thread(target=parallel, args=("add", ADD, {"a": 2, "b": 40})),
    threading.Thread(target=parallel, args=("echo", ECHO, {"text": "hi there"})),
]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"""


@pytest.mark.parametrize("sandbox", ["off", *sandbox_kinds()])
def test_a_program_calls_five_tools_two_in_parallel_as_invoke_would(
    workspace: Path, gateway: McpGateway, sandbox: str
) -> None:
    with make_router(workspace, sandbox=sandbox, gateway=gateway) as router:
        exposure = router.expose(["read_file", "grep", "scale", "run_code"], ["calc"])
        add = next(n for n in exposure.names if n.endswith("add"))
        echo = next(n for n in exposure.names if n.endswith("echo"))
        program = FIVE_CALLS.replace("ADD", repr(add)).replace("ECHO", repr(echo))
        output = run(router, exposure, program)
        assert output.trace["exitCode"] == 0, output.text
        got = json.loads(output.text)
        one_by_one = {
            "read_file": router.invoke("read_file", {"path": "notes.txt"}),
            "grep": router.invoke("grep", {"pattern": "needle"}),
            "scale": router.invoke("scale", {"value": 4, "factor": 3}),
            "add": router.invoke(add, {"a": 2, "b": 40}),
            "echo": router.invoke(echo, {"text": "hi there"}),
        }
        assert got == {key: as_value(text) for key, text in one_by_one.items()}
        assert got["add"] == 42 and got["scale"] == {"value": 12}
        calls = output.trace["calls"]
        assert sorted(c["name"] for c in calls) == sorted(["read_file", "grep", "scale", add, echo])
        assert all(c["outcome"] == "ok" for c in calls)
        assert output.trace["sandbox"]["confinement"] == ("none" if sandbox == "off" else sandbox)


def test_the_description_lists_what_the_program_may_call_with_signatures(workspace: Path) -> None:
    with make_router(workspace) as router:
        exposure = router.expose(["read_file", "scale", "run_code"])
        description = exposure.tools["run_code"].definition()["function"]["description"]
        assert "scale(*, value: float, factor: float = ...)  # Multiply a number by a factor." in description
        assert "read_file(*, path: str" in description
        assert "secret_tool" not in description and "bash" not in description
        assert exposure.names == ["read_file", "scale", "run_code"]


def test_a_name_outside_the_request_is_refused_whatever_the_router_could_reach(workspace: Path) -> None:
    program = """
import tools
for name in ["bash", "secret_tool", "run_code", "write_file", "user_u2_tool_add"]:
    try:
        tools.call(name)
        print(name, "RAN")
    except tools.ToolError as e:
        print(name, e.kind)
print(sorted(n for n in tools.__all__ if n not in ("call", "ToolError")))
"""
    with make_router(workspace) as router:
        exposure = router.expose(["read_file", "run_code"])
        output = run(router, exposure, program)
    lines = output.text.splitlines()
    assert lines[:5] == [
        f"{n} ToolNotFoundError" for n in ["bash", "secret_tool", "run_code", "write_file", "user_u2_tool_add"]
    ]
    assert lines[5] == "['read_file']"
    assert "RAN" not in output.text


def test_another_users_tools_are_not_callable_from_a_users_program(workspace: Path, deployed: Path) -> None:
    (deployed / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    gateway = McpGateway.from_file(deployed / "mcp.json")
    gateway.add_user_server("u1", "mine", demo_stdio("u1srv"))
    gateway.add_user_server("u2", "mine", demo_stdio("u2srv"))
    with make_router(workspace, gateway=gateway) as router:
        mine = router.expose(["run_code"], user_id="u1", user_servers=["mine"])
        theirs = router.expose(["run_code"], user_id="u2", user_servers=["mine"])
        own_name = next(n for n in mine.names if n.endswith("_pid"))
        other_name = next(n for n in theirs.names if n.endswith("_pid"))
        assert own_name != other_name
        program = f"""
import tools
print(tools.call({own_name!r}) > 0)
try:
    tools.call({other_name!r})
except tools.ToolError as e:
    print("refused", e.kind)
"""
        output = run(router, mine, program)
    assert output.text.splitlines() == ["True", "refused ToolNotFoundError"]


def test_a_tool_error_is_an_exception_the_program_can_catch(workspace: Path) -> None:
    program = """
from tools import read_file, ToolError
try:
    read_file(path="missing.txt")
except ToolError as e:
    print(e.kind, "|", "missing.txt" in e.message)
try:
    read_file(path="../../outside.txt")
except ToolError as e:
    print(e.kind)
try:
    read_file(nonsense=1)
except ToolError as e:
    print(e.kind)
"""
    with make_router(workspace) as router:
        output = run(router, router.expose(["read_file", "run_code"]), program)
    kinds = output.text.splitlines()
    assert kinds[0] == "PathNotFoundError | True"
    assert kinds[1] == "PathDeniedError"
    assert kinds[2] == "ToolArgumentError"
    assert [c["outcome"] for c in output.trace["calls"]] == ["error", "error", "error"]


def test_async_forms_run_calls_concurrently(workspace: Path) -> None:
    @function_tool(name="nap", description="Sleep, then say so.")
    def nap(seconds: float) -> str:
        time.sleep(seconds)
        return "rested"

    program = """
import asyncio, time
from tools import aio
async def main():
    started = time.monotonic()
    got = await asyncio.gather(*(aio.nap(seconds=0.5) for _ in range(4)))
    return got, time.monotonic() - started
got, took = asyncio.run(main())
print(got, took < 1.6)
"""
    with make_router(workspace) as router:
        router.register(nap)
        output = run(router, router.expose(["nap", "run_code"]), program)
    # four half-second naps on four lanes: well under the two seconds they take one by one
    assert output.text.strip() == "['rested', 'rested', 'rested', 'rested'] True", output.text


def test_a_program_past_its_time_limit_is_ended_with_its_processes(workspace: Path) -> None:
    program = """
import subprocess, time
child = subprocess.Popen(["sleep", "300"])
open("child.pid", "w").write(str(child.pid))
print("started", flush=True)
time.sleep(300)
"""
    with make_router(workspace) as router:
        started = time.monotonic()
        output = run(router, router.expose(["run_code"]), program, timeout=1.5)
        took = time.monotonic() - started
    assert took < 30
    assert output.trace["timedOut"] is True
    assert "started" in output.text and "time limit of 1.5 s" in output.text
    pid = int((workspace / "child.pid").read_text())
    wait_until(lambda: not is_alive(pid), "the program's child to be ended with it")


def test_a_program_is_bounded_in_memory_and_output(workspace: Path) -> None:
    mode = CodeMode(memory_bytes=256 << 20)
    with make_router(workspace, code_mode=mode, limits=ToolLimits(max_output_chars=2000)) as router:
        exposure = router.expose(["run_code"])
        memory = run(router, exposure, "x = bytearray(1 << 30)\nprint('allocated')")
        flood = run(router, exposure, "print('y' * 200_000)")
    assert "MemoryError" in memory.text and "allocated" not in memory.text
    assert memory.trace["exitCode"] == 1
    assert len(flood.text) <= 2000
    assert flood.trace["stdoutBytes"] == 200_001


def test_a_program_making_too_many_calls_gets_refusals_past_the_cap(workspace: Path) -> None:
    program = """
import tools
kinds = []
for i in range(8):
    try:
        tools.scale(value=i); kinds.append("ok")
    except tools.ToolError as e:
        kinds.append(e.kind)
print(kinds)
"""
    with make_router(workspace, code_mode=CodeMode(max_calls=5)) as router:
        output = run(router, router.expose(["scale", "run_code"]), program)
    assert output.text.strip() == str(["ok"] * 5 + ["TooManyCalls"] * 3)
    assert len(output.trace["calls"]) == 5


HOSTILE_WRITES = {
    "not JSON": "b'this is not json\\n'",
    "not a call": 'b\'{"id": "x", "name": 3}\\n\'',
    "too long": "b'{' + b' ' * (3 << 20)",
}


@pytest.mark.parametrize("what", sorted(HOSTILE_WRITES))
def test_a_program_that_writes_garbage_to_its_channel_loses_the_channel_not_the_host(
    workspace: Path, what: str
) -> None:
    program = f"""
import os
import tools
from tools import scale, ToolError
print(scale(value=1))
# what the program's own machinery holds: the channel, and its descriptor
channel = next(c.cell_contents for c in tools.call.__closure__ if hasattr(c.cell_contents, "_write_fd"))
fd = channel._write_fd
data = {HOSTILE_WRITES[what]}
try:
    while data:
        data = data[os.write(fd, data):]
except OSError as e:
    print("write failed", e.errno)
import time
import uuid
time.sleep(0.5)
try:
    scale(value=2)
    print("still served")
except ToolError as e:
    print("after:", e.kind)
"""
    with make_router(workspace, limits=ToolLimits(max_write_bytes=1000)) as router:
        exposure = router.expose(["scale", "run_code"])
        output = run(router, exposure, program, timeout=30)
        assert not output.trace["timedOut"]
        assert "still served" not in output.text
        assert "ChannelClosed" in output.text or "write failed" in output.text, output.text
        assert output.trace["channelError"]
        # the host serves the next program as if nothing happened
        again = run(router, exposure, "print(scale(value=5))")
    assert again.text.strip() == "{'value': 10.0}"


def test_the_channel_variable_is_not_left_for_the_program(workspace: Path) -> None:
    with make_router(workspace) as router:
        output = run(router, router.expose(["run_code"]), "import os; print('TOOLROUTE_CODE_CHANNEL' in os.environ)")
    assert output.text.strip() == "False"


@pytest.mark.parametrize("sandbox", sandbox_kinds())
def test_a_sandboxed_program_sees_the_workspace_and_nothing_of_the_host_it_may_not(
    workspace: Path, deployed: Path, sandbox: str
) -> None:
    (deployed / "private.txt").write_text("host secret")
    # A system folder the sandbox shows read-only; a name of this test's own, removed below if a
    # broken sandbox let it be written.
    probe = Path("/etc") / f"toolroute-written-{uuid.uuid4().hex}"
    program = f"""
import socket
try:
    print(open({str(deployed / "private.txt")!r}).read())
except OSError as e:
    print("hidden", type(e).__name__)
try:
    open({str(probe)!r}, "w")
except OSError as e:
    print("read-only", type(e).__name__)
try:
    socket.create_connection(("127.0.0.1", 9), timeout=2)
except OSError as e:
    print("no network", type(e).__name__)
open("made.txt", "w").write("by the program")
"""
    context = BuiltInToolContext(workspace, sandbox=sandbox, sandbox_view="minimal")  # type: ignore[arg-type]
    try:
        with ToolRouter(context=context) as router:
            output = run(router, router.expose(["run_code"]), program)
        written = probe.exists()
    finally:
        probe.unlink(missing_ok=True)
    lines = output.text.splitlines()
    assert lines[0].startswith("hidden"), output.text
    assert lines[1].startswith("read-only") and lines[2].startswith("no network")
    assert (workspace / "made.txt").read_text() == "by the program"
    assert not written


def test_cancelling_the_call_ends_the_program_and_the_inner_call_it_waits_on(workspace: Path) -> None:
    program = """
bash(command="echo $$ > inner.pid; exec sleep 300", timeout=300)
print("never")
"""

    async def call_then_leave() -> None:
        with anyio.move_on_after(60) as scope:
            task = router.arun(exposure.get("run_code"), {"code": program})  # type: ignore[arg-type]
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: task)
                while not (workspace / "inner.pid").exists():
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # the client went away
        assert not scope.cancelled_caught, "the inner command never started"

    with make_router(workspace) as router:
        exposure = router.expose(["bash", "run_code"])
        anyio.run(call_then_leave)
        pid = int((workspace / "inner.pid").read_text())
        wait_until(lambda: not is_alive(pid), "the inner command to be ended with its program")


def test_under_bubblewrap_an_interpreter_under_tmp_is_not_chosen(workspace: Path, tmp_path: Path) -> None:
    """bubblewrap covers the host's /tmp with the command's private one, in either view: a host
    interpreter living there (a virtual environment made with mktemp, as CI's wheel check does)
    cannot run inside, so code mode takes a python3 the sandbox shows instead."""
    from toolroute.builtins._process.sandbox import SandboxPlan, visible

    plan = SandboxPlan(kind="bubblewrap", workspace=workspace, private_tmp=tmp_path / "private")
    assert not visible(Path("/tmp/venv/bin/python"), plan)
    assert visible(workspace / "x", plan) and visible(Path("/usr/bin"), plan)
    inside_tmp = SandboxPlan(kind="bubblewrap", workspace=Path("/tmp/ws"), private_tmp=tmp_path / "p")
    assert visible(Path("/tmp/ws/a.py"), inside_tmp) and not visible(Path("/tmp/other"), inside_tmp)
    landlock = SandboxPlan(kind="landlock", workspace=workspace, private_tmp=tmp_path / "private")
    assert visible(Path("/tmp/venv/bin/python"), landlock)  # Landlock's host view reads /tmp

    venv = Path("/tmp") / f"toolroute-venv-{os.getpid()}"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        python = str(venv / "bin" / "python")
        env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin"}
        code = (
            "import sys; from toolroute.codemode.tool import interpreter, CodeMode; "
            "from toolroute.builtins._process.sandbox import SandboxPlan; from pathlib import Path; "
            f"plan = SandboxPlan(kind='bubblewrap', workspace=Path({str(workspace)!r}), private_tmp=Path('/var/tmp')); "
            f"print(interpreter(CodeMode(), plan, {env!r}))"
        )
        pythonpath = os.pathsep.join(p for p in sys.path if p)
        done = subprocess.run(
            [python, "-c", code], env={"PYTHONPATH": pythonpath}, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        chosen = done.stdout.strip()
        assert not chosen.startswith("/tmp/") and chosen.endswith("python3"), chosen
    finally:
        shutil.rmtree(venv, ignore_errors=True)
