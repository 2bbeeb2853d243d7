"""openai-agents' SandboxAgent on toolroute's sandbox client, side by side with the SDK's own
`unix_local` backend: the same scripted run (the SDK's ScriptedModel, no network) on both, then
what each left behind. Workspaces live outside /tmp, as deployed (a sandbox replaces /tmp)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _serve_helpers import outside_tmp

pytest.importorskip("agents.sandbox")

from agents import RunConfig, Runner
from agents.run_config import SandboxRunConfig
from agents.sandbox import SandboxAgent
from agents.sandbox.capabilities import Capabilities
from agents.sandbox.errors import (
    ApplyPatchDiffError,
    ExecTimeoutError,
    InvalidManifestPathError,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
)
from agents.sandbox.manifest import Environment, Manifest
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseCustomToolCall

from toolroute import BuiltInToolContext
from toolroute.adapters.agents_sandbox import (
    ToolrouteSandboxClient,
    ToolrouteSandboxSession,
    capabilities,
)
from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind

SECRET = "sk-host-secret-789"


@pytest.fixture
def base() -> Iterator[Path]:
    folder = outside_tmp()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def confined() -> None:
    try:
        resolve_kind("on")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")


def _patch_call(call_id: str, patch: str) -> ResponseCustomToolCall:
    return ResponseCustomToolCall(type="custom_tool_call", id=call_id, call_id=call_id, name="apply_patch", input=patch)


def _outputs(call: Any) -> dict[str, str]:
    """The tool outputs a model call received, by call id."""
    found = {}
    for item in call.input:
        if isinstance(item, dict) and str(item.get("type", "")).endswith("_output"):
            output = item.get("output")
            found[item["call_id"]] = output if isinstance(output, str) else json.dumps(output)
    return found


def _write_stdin_after(call_id: str, chars: str) -> ModelStep:
    """A step that answers the session id the previous exec_command reported."""

    def respond(call: Any) -> list[Any]:
        text = _outputs(call)[call_id]
        session = re.search(r"session ID (\d+)", text)
        assert session is not None, text
        arguments = {"session_id": int(session.group(1)), "chars": chars, "yield_time_ms": 3000}
        return [function_call("write_stdin", arguments, call_id="w1")]

    return ModelStep.respond(respond)


THREE_FILES = """*** Begin Patch
*** Add File: new.txt
+created
*** Update File: kept.txt
@@
-old
+changed
*** Update File: missing.txt
@@
-a
+b
*** End Patch"""


def _run(client: Any, workspace: Path, outside: Path, caps: list[Any]) -> ScriptedModel:
    """One scripted SandboxAgent run: a command that reads a host secret and writes outside,
    a three-file patch whose third file does not exist, and an interactive command."""
    (workspace / "kept.txt").write_text("old\n")
    model = ScriptedModel(
        [
            [
                function_call(
                    "exec_command",
                    {"cmd": f"echo key=[$OPENAI_API_KEY]; echo x > {outside}/escape.txt; echo wrote=$?"},
                    call_id="e1",
                )
            ],
            [_patch_call("p1", THREE_FILES)],
            [
                function_call(
                    "exec_command",
                    {"cmd": "read line; echo got:$line", "tty": True, "yield_time_ms": 300},
                    call_id="e2",
                )
            ],
            _write_stdin_after("e2", "hello\n"),
            [assistant_message("done")],
        ]
    )
    agent = SandboxAgent(name="coder", model=model, capabilities=caps, default_manifest=Manifest(root=str(workspace)))
    config = RunConfig(tracing_disabled=True, sandbox=SandboxRunConfig(client=client))
    os.environ["OPENAI_API_KEY"] = SECRET
    try:
        result = anyio.run(lambda: Runner.run(agent, "go", run_config=config, max_turns=10))
    finally:
        del os.environ["OPENAI_API_KEY"]
    assert result.final_output == "done"
    return model


def test_a_sandbox_agent_on_toolroute_keeps_what_unix_local_does_not(base: Path, confined: None) -> None:
    """The same run on both backends: on unix_local the command leaks the host's key and
    writes outside the workspace, and the failed patch leaves two of three files changed; on
    toolroute's client the key is not there, nothing is written outside, and the patch changes
    nothing. The interactive command answers on both."""
    seen: dict[str, tuple[ScriptedModel, Path, Path]] = {}
    for name, client, caps in (
        ("unix_local", UnixLocalSandboxClient(), Capabilities.default()),
        ("toolroute", ToolrouteSandboxClient(), capabilities()),
    ):
        workspace, outside = base / name / "ws", base / name / "outside"
        workspace.mkdir(parents=True)
        outside.mkdir()
        seen[name] = (_run(client, workspace, outside, caps), workspace, outside)

    # The reference, as a user would otherwise run it.
    model, workspace, outside = seen["unix_local"]
    outputs = _outputs(model.calls[-1])
    assert f"key=[{SECRET}]" in outputs["e1"] and (outside / "escape.txt").exists()
    assert (workspace / "new.txt").exists() and (workspace / "kept.txt").read_text() == "changed\n"
    assert "missing.txt" in outputs["p1"]
    assert "got:hello" in outputs["w1"]

    model, workspace, outside = seen["toolroute"]
    outputs = _outputs(model.calls[-1])
    assert "key=[]" in outputs["e1"] and SECRET not in json.dumps(outputs)
    assert not (outside / "escape.txt").exists()
    assert not (workspace / "new.txt").exists() and (workspace / "kept.txt").read_text() == "old\n"
    assert "missing.txt" in outputs["p1"]
    assert "got:hello" in outputs["w1"] and "Process exited with code 0" in outputs["w1"]


def test_a_patch_that_applies_is_applied_whole_and_answered_per_file(base: Path, confined: None) -> None:
    client = ToolrouteSandboxClient()
    (base / "kept.txt").write_text("old\n")
    patch = THREE_FILES.replace("*** Update File: missing.txt\n@@\n-a\n+b\n", "*** Delete File: kept2.txt\n")
    (base / "kept2.txt").write_text("gone\n")
    model = ScriptedModel([[_patch_call("p1", patch)], [assistant_message("done")]])
    agent = SandboxAgent(
        name="coder", model=model, capabilities=capabilities(), default_manifest=Manifest(root=str(base))
    )
    config = RunConfig(tracing_disabled=True, sandbox=SandboxRunConfig(client=client))
    anyio.run(lambda: Runner.run(agent, "go", run_config=config))
    assert _outputs(model.calls[-1])["p1"] == "Created new.txt\nUpdated kept.txt\nDeleted kept2.txt"
    assert (base / "new.txt").read_text() == "created" and (base / "kept.txt").read_text() == "changed\n"
    assert not (base / "kept2.txt").exists()


# ---- the session's own API --------------------------------------------------------------------


async def _session(client: ToolrouteSandboxClient, **manifest: Any) -> Any:
    session = await client.create(manifest=Manifest(**manifest))
    await session.start()
    return session


def test_files_are_byte_exact_and_confined(base: Path, confined: None) -> None:
    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        session = await _session(client)
        root = Path(session._inner.state.manifest.root)
        assert root.parent == base and isinstance(session._inner, ToolrouteSandboxSession)
        every_byte = bytes(range(256)) * 3
        await session.write(Path("bin/all.bin"), io.BytesIO(every_byte))
        assert (await session.read(Path("bin/all.bin"))).read() == every_byte
        assert (root / "bin" / "all.bin").read_bytes() == every_byte
        assert await session.read_bounded(Path("bin/all.bin"), max_bytes=10) == every_byte[:10]
        with pytest.raises(WorkspaceReadNotFoundError):
            await session.read(Path("nothing.txt"))
        with pytest.raises(InvalidManifestPathError):
            await session.read(Path("../outside.txt"))
        # Symlinks planted in the workspace (a file, a folder) do not lead a write or a read
        # out of it: the SDK's path policy lets them through, toolroute's confinement does not.
        (base / "outside.txt").write_text("host file\n")
        (root / "link.txt").symlink_to(base / "outside.txt")
        (root / "dir_link").symlink_to(base)
        for planted in ("link.txt", "dir_link/outside.txt"):
            with pytest.raises(WorkspaceArchiveWriteError):
                await session.write(Path(planted), io.BytesIO(b"overwritten"))
            with pytest.raises(WorkspaceArchiveReadError):
                await session.read(Path(planted))
        assert (base / "outside.txt").read_text() == "host file\n"
        await session.aclose()
        await client.delete(session)
        assert not root.exists()  # the client made it, the client removed it

    anyio.run(main)


def test_commands_get_the_manifest_environment_a_timeout_and_no_host_secret(base: Path, confined: None) -> None:
    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        session = await _session(client, environment=Environment(value={"GREETING": "hi there"}))
        os.environ["OPENAI_API_KEY"] = SECRET
        try:
            done = await session.exec('echo "$GREETING"; echo [$OPENAI_API_KEY]; echo err >&2; exit 3')
        finally:
            del os.environ["OPENAI_API_KEY"]
        assert (done.stdout, done.stderr, done.exit_code) == (b"hi there\n[]\n", b"err\n", 3)
        argv = await session.exec("printf", "%s|", "a b", "$HOME", shell=False)
        assert argv.stdout == b"a b|$HOME|"  # argv as given: no splitting, no expansion
        with pytest.raises(ExecTimeoutError):
            await session.exec("sleep 30", timeout=0.5)
        await session.aclose()
        await client.delete(session)

    anyio.run(main)


def test_interactive_commands_without_a_terminal_see_end_of_input(base: Path, confined: None) -> None:
    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        session = await _session(client)
        ended = await session.pty_exec_start("cat; echo after-eof", tty=False, yield_time_s=5)
        assert (ended.process_id, ended.exit_code, ended.output) == (None, 0, b"after-eof\n")
        running = await session.pty_exec_start("sleep 30", tty=False, yield_time_s=0.3)
        assert running.process_id is not None and running.exit_code is None
        with pytest.raises(RuntimeError, match="stdin"):
            await session.pty_write_stdin(session_id=running.process_id, chars="x")
        await session.aclose()  # ends the running command
        listed = await client.tools.aexecute("bash", {"action": "list"})
        assert "RUNNING" not in listed.text
        await client.delete(session)

    anyio.run(main)


def test_a_workspace_survives_persist_and_hydrate_without_what_leads_out(base: Path, confined: None) -> None:
    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        first = await _session(client)
        root = Path(first._inner.state.manifest.root)
        (root / "src").mkdir()
        (root / "src" / "a.py").write_bytes(b"print('a')\n\xff")
        (root / "src" / "rel_link").symlink_to("a.py")
        (root / "out_link").symlink_to("/etc/passwd")
        (root / "up_link").symlink_to("../../..")
        os.mkfifo(root / "fifo")
        archive = await first.persist_workspace()
        with tarfile.open(fileobj=archive) as tar:
            names = set(tar.getnames())
        assert {"./src", "./src/a.py", "./src/rel_link"} <= names
        assert not names & {"./out_link", "./up_link", "./fifo"}
        archive.seek(0)
        second = await _session(client)
        await second.hydrate_workspace(archive)
        other = Path(second._inner.state.manifest.root)
        assert (other / "src" / "a.py").read_bytes() == b"print('a')\n\xff"
        assert os.readlink(other / "src" / "rel_link") == "a.py"
        # An archive with a member that climbs out is refused, and writes nothing outside.
        hostile = io.BytesIO()
        with tarfile.open(fileobj=hostile, mode="w") as tar:
            info = tarfile.TarInfo("../escaped.txt")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        hostile.seek(0)
        with pytest.raises(WorkspaceArchiveWriteError):
            await second.hydrate_workspace(hostile)
        assert not (other.parent / "escaped.txt").exists()
        for session in (first, second):
            await session.aclose()
            await client.delete(session)

    anyio.run(main)


def test_state_round_trips_and_resumes_on_the_same_workspace(base: Path, confined: None) -> None:
    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        session = await _session(client)
        await session.write(Path("note.txt"), io.BytesIO(b"kept"))
        payload = json.loads(json.dumps(client.serialize_session_state(session._inner.state)))
        assert payload["type"] == "toolroute"
        state = client.deserialize_session_state(payload)
        resumed = await client.resume(state)
        await resumed.start()
        assert (await resumed.read(Path("note.txt"))).read() == b"kept"
        await resumed.aclose()
        await client.delete(resumed)

    anyio.run(main)


def test_a_context_for_another_folder_and_unsupported_manifests_are_refused(base: Path) -> None:
    async def main() -> None:
        elsewhere = BuiltInToolContext(base)
        client = ToolrouteSandboxClient(workspaces=base, context=lambda _root: elsewhere)
        session = await client.create()
        with pytest.raises(Exception) as failed:
            await session.start()
        causes = []
        error: BaseException | None = failed.value
        while error is not None and len(causes) < 10:
            causes.append(str(error))
            error = error.__cause__
        assert any("not for the session's workspace" in c for c in causes), causes
        with pytest.raises(ValueError, match="users or groups"):
            from agents.sandbox.types import User

            await client.create(manifest=Manifest(users=[User(name="someone")]))

    anyio.run(main)


def test_a_patch_moves_a_file_and_a_move_is_only_an_updates(base: Path, confined: None) -> None:
    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        session = await _session(client)
        root = Path(session._inner.state.manifest.root)
        (root / "a.txt").write_text("one\ntwo\n")
        inner = session._inner
        move = {"type": "update_file", "path": "a.txt", "diff": "@@\n-two\n+TWO\n", "move_to": "b/c.txt"}
        await inner.apply_patch([move])
        assert not (root / "a.txt").exists() and (root / "b" / "c.txt").read_text() == "one\nTWO\n"
        with pytest.raises(ApplyPatchDiffError, match="only update_file can move"):
            await inner.apply_patch([{"type": "create_file", "path": "d.txt", "diff": "+d", "move_to": "e.txt"}])
        # Out of the workspace through a planted folder symlink (the SDK's path policy lets it
        # through): refused by the confinement, and nothing moved or changed.
        (root / "dir_link").symlink_to(base)
        with pytest.raises(ApplyPatchDiffError, match="outside"):
            await inner.apply_patch(
                [{"type": "update_file", "path": "b/c.txt", "diff": "@@\n-one\n+1\n", "move_to": "dir_link/x.txt"}]
            )
        assert (root / "b" / "c.txt").read_text() == "one\nTWO\n" and not (base / "x.txt").exists()
        await session.aclose()
        await client.delete(session)

    anyio.run(main)


def test_view_image_is_read_files_image_confined_and_fitted(base: Path, confined: None) -> None:
    """The SandboxAgent's `view_image` on a toolroute session: the image read_file shows (the
    file's bytes when they fit; downscaled past the providers' limits, where the SDK's own tool
    passes up to 10 MB as is), and a planted link out of the workspace refused."""
    import base64

    from agents.tool import ToolOutputImage
    from PIL import Image

    from toolroute.adapters.agents_sandbox import ReadFileViewImageTool

    small, wide = io.BytesIO(), io.BytesIO()
    Image.new("RGB", (30, 20), (10, 200, 30)).save(small, "PNG")
    Image.new("RGB", (6000, 100), (200, 10, 30)).save(wide, "PNG")

    async def main() -> None:
        client = ToolrouteSandboxClient(workspaces=base)
        session = await _session(client)
        root = Path(session._inner.state.manifest.root)
        (root / "small.png").write_bytes(small.getvalue())
        (root / "wide.png").write_bytes(wide.getvalue())
        (root / "notes.txt").write_text("text\n")
        Image.new("RGB", (5, 5)).save(base / "outside.png")
        (root / "link.png").symlink_to(base / "outside.png")
        filesystem = capabilities()[0]
        filesystem.bind(session)
        (view,) = [t for t in filesystem.tools() if t.name == "view_image"]
        assert isinstance(view, ReadFileViewImageTool)

        async def look(path: str) -> Any:
            return await view.on_invoke_tool(None, json.dumps({"path": path}))

        shown = await look("small.png")
        assert isinstance(shown, ToolOutputImage)
        assert base64.b64decode(shown.image_url.split(",", 1)[1]) == small.getvalue()
        fitted = await look("wide.png")
        image = Image.open(io.BytesIO(base64.b64decode(fitted.image_url.split(",", 1)[1])))
        assert image.size == (2000, 33)
        assert await look("notes.txt") == "image path `notes.txt` is not a supported image file"
        assert await look("missing.png") == "image path `missing.png` was not found"
        refused = await look("link.png")
        assert isinstance(refused, str) and "outside the allowed roots" in refused
        await session.aclose()
        await client.delete(session)

    anyio.run(main)
