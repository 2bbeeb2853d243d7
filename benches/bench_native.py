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
