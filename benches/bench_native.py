"""The native tool types' per-call cost against the references doing the same work (issue 41).

Run: python -m pytest benches/bench_native.py -s   (interleaved: benches/_interleave.py)

- an `apply_patch_call` (a V4A update of a 2,000-line file): toolroute's adapter, through the
  allowlist's apply_patch (confined, written atomically), against openai-agents' editor's work:
  read the file, `agents.apply_diff.apply_diff`, write it back;
- a `shell_call` of one command: toolroute's adapter, through bash, against the SDK's
  `unix_local` way (`asyncio.create_subprocess_exec` of `bash -c`, unconfined);
- a memory session (create, view, str_replace, insert, view, delete): toolroute's `MemoryTool`
  against the anthropic SDK's `BetaLocalFilesystemMemoryTool`.

Each side's result is checked equal before timing. Ratio = reference time / toolroute time.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _interleave import Case, compare

from toolroute import BuiltInToolContext, ToolRouter

ROUNDS = 30


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="toolroute-native-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_apply_patch_call_against_the_agents_editor(folder: Path) -> None:
    from agents.apply_diff import apply_diff

    from toolroute.adapters.openai import OpenAITools

    lines = [f"def f{i}(x):\n    return x + {i}\n" for i in range(1000)]
    original = "".join(lines)
    diff = "@@ def f500(x):\n-    return x + 500\n+    return x * 500\n"
    ours, theirs = folder / "ours.py", folder / "theirs.py"
    router = ToolRouter(context=BuiltInToolContext(folder))
    tools = OpenAITools(router, functions=["apply_patch"], native=["apply_patch"])
    call = {
        "type": "apply_patch_call",
        "call_id": "c",
        "operation": {"type": "update_file", "path": "ours.py", "diff": diff},
    }

    def toolroute() -> str:
        (answer,) = tools.call_outputs([call])
        assert answer["status"] == "completed", answer
        return ours.read_text()

    def reference() -> str:
        theirs.write_text(apply_diff(theirs.read_text(), diff))
        return theirs.read_text()

    try:
        compare(
            "native apply_patch_call, a V4A update of a 2,000-line file",
            ("toolroute (adapter, atomic write)", Case(toolroute, setup=lambda: ours.write_text(original))),
            {"openai-agents editor (apply_diff + write)": Case(reference, setup=lambda: theirs.write_text(original))},
            ROUNDS,
        )
    finally:
        router.close()


def test_shell_call_against_unix_local_exec(folder: Path) -> None:
    from toolroute.adapters.openai import OpenAITools

    router = ToolRouter(context=BuiltInToolContext(folder))
    tools = OpenAITools(router, functions=["bash"], native=["shell"])
    command = "echo hello; echo world"

    def toolroute() -> str:
        (answer,) = tools.call_outputs([{"type": "shell_call", "call_id": "c", "action": {"commands": [command]}}])
        return str(answer["output"][0]["stdout"])

    async def spawn() -> str:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=folder, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        return out.decode()

    loop = asyncio.new_event_loop()  # one loop for every call, as a running agent has
    try:
        compare(
            "native shell_call, one command",
            ("toolroute (adapter, bash tool)", toolroute),
            {"unix_local's exec (create_subprocess_exec)": lambda: loop.run_until_complete(spawn())},
            ROUNDS,
        )
    finally:
        loop.close()
        router.close()


def _session(tool: Any) -> list[str]:
    name = f"/memories/{uuid.uuid4().hex}.md"
    steps = [
        {"command": "create", "path": name, "file_text": "# Notes\nlikes coffee\n"},
        {"command": "view", "path": name},
        {"command": "str_replace", "path": name, "old_str": "coffee", "new_str": "tea"},
        {"command": "insert", "path": name, "insert_line": 1, "insert_text": "- mornings"},
        {"command": "view", "path": name},
        {"command": "delete", "path": name},
    ]
    return [str(tool.call(step)).replace(name, "NAME") for step in steps]


def test_memory_against_the_anthropic_reference(folder: Path) -> None:
    from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

    from toolroute.adapters.anthropic import MemoryTool

    reference = BetaLocalFilesystemMemoryTool(str(folder / "reference"))
    ours = MemoryTool(folder / "ours" / "memories")
    compare(
        "native memory tool, a six-command session",
        ("toolroute MemoryTool (confined, atomic)", lambda: _session(ours)),
        {"anthropic BetaLocalFilesystemMemoryTool": lambda: _session(reference)},
        ROUNDS,
    )


# ---- openai-agents' SandboxAgent backends: toolroute's client against unix_local ---------------

SANDBOX_PATCH = """*** Begin Patch
*** Update File: a.py
@@
-x = 1
+x = 2
*** Update File: b.py
@@
-y = 1
+y = 2
*** Add File: c.py
+z = 3
*** End Patch"""


def _sandbox_sessions(folder: Path, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    """A started session per backend, each on a folder of its own."""
    from agents.sandbox.manifest import Manifest
    from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient

    from toolroute.adapters.agents_sandbox import ToolrouteSandboxClient

    clients = {
        "toolroute (sandboxed: the default)": ToolrouteSandboxClient(),
        "toolroute (sandbox off)": ToolrouteSandboxClient(context=lambda root: BuiltInToolContext(root)),
        "unix_local": UnixLocalSandboxClient(),
    }
    sessions = {}
    for i, (name, client) in enumerate(clients.items()):
        root = folder / f"ws{i}"
        session = loop.run_until_complete(client.create(manifest=Manifest(root=str(root))))
        loop.run_until_complete(session.start())
        sessions[name] = session
    return sessions


def test_sandbox_session_exec_against_unix_local(folder: Path) -> None:
    loop = asyncio.new_event_loop()
    sessions = _sandbox_sessions(folder, loop)

    def run(session: Any) -> Any:
        def call() -> bytes:
            done = loop.run_until_complete(session.exec("echo hello; echo world"))
            return bytes(done.stdout)

        return call

    try:
        (first, *others) = sessions.items()
        compare(
            "SandboxAgent session exec, one command",
            (first[0], run(first[1])),
            {name: run(session) for name, session in others},
            ROUNDS,
        )
    finally:
        for session in sessions.values():
            loop.run_until_complete(session.aclose())
        loop.close()


def test_sandbox_apply_patch_tool_against_unix_local(folder: Path) -> None:
    from agents.sandbox.capabilities.tools.apply_patch_tool import SandboxApplyPatchTool

    from toolroute.adapters.agents_sandbox import AtomicApplyPatchTool

    loop = asyncio.new_event_loop()
    sessions = _sandbox_sessions(folder, loop)

    def case(session: Any, tool_class: type) -> Case:
        root = Path(session.state.manifest.root)
        tool = tool_class(session=session)

        def setup() -> None:
            (root / "a.py").write_text("x = 1\n")
            (root / "b.py").write_text("y = 1\n")
            (root / "c.py").unlink(missing_ok=True)

        def call() -> list[str]:
            loop.run_until_complete(tool._on_invoke_tool(None, SANDBOX_PATCH))
            return [(root / n).read_text() for n in ("a.py", "b.py", "c.py")]

        return Case(call, setup=setup)

    try:
        names = list(sessions)
        compare(
            "SandboxAgent apply_patch tool, a 3-file patch",
            (names[0], case(sessions[names[0]], AtomicApplyPatchTool)),
            {
                names[1]: case(sessions[names[1]], AtomicApplyPatchTool),
                "unix_local (the SDK's tool, file by file)": case(sessions["unix_local"], SandboxApplyPatchTool),
            },
            ROUNDS,
        )
    finally:
        for session in sessions.values():
            loop.run_until_complete(session.aclose())
        loop.close()
