"""Anthropic's native coding tools on toolroute (issue 41): `bash_20250124` as one shell per
conversation, `text_editor_20250728` in its documented words, and `memory_20250818` against the
anthropic SDK's own reference implementation, step by step, files and answers alike."""

from __future__ import annotations

import os
import shutil
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.adapters.anthropic import AnthropicTools, MemoryTool

EDITOR = "str_replace_based_edit_tool"


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[AnthropicTools]:
    ws = tmp_path / "ws"
    ws.mkdir()
    with ToolRouter(context=BuiltInToolContext(ws)) as router:
        adapter = AnthropicTools(
            router,
            functions=["bash", "read_file", "write_file", "edit"],
            native=["bash", "text_editor", "memory"],
            memory=tmp_path / "memory",
        )
        yield adapter
        adapter.close()


def use(tools: AnthropicTools, name: str, **arguments: Any) -> dict[str, Any]:
    block = types.SimpleNamespace(type="tool_use", id="toolu_1", name=name, input=arguments)
    (result,) = tools.tool_results([block])
    assert result["tool_use_id"] == "toolu_1"
    return dict(result)


def text(tools: AnthropicTools, name: str, **arguments: Any) -> str:
    result = use(tools, name, **arguments)
    assert not result.get("is_error"), result
    return str(result["content"])


def error(tools: AnthropicTools, name: str, **arguments: Any) -> str:
    result = use(tools, name, **arguments)
    assert result.get("is_error") is True, result
    return str(result["content"])


def test_the_native_declarations_replace_the_bash_function(tools: AnthropicTools) -> None:
    declared = tools.anthropic_tools()
    natives = [t for t in declared if "type" in t]
    assert natives == [
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": EDITOR},
        {"type": "memory_20250818", "name": "memory"},
    ]
    assert sorted(t["name"] for t in declared if "type" not in t) == ["edit", "read_file", "write_file"]


def test_a_native_tool_needs_its_built_ins_exposed(tmp_path: Path) -> None:
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as router:
        with pytest.raises(ValueError, match="bash"):
            AnthropicTools(router, functions=["read_file"], native=["bash"])
        with pytest.raises(ValueError, match="write_file, edit"):
            AnthropicTools(router, functions=["read_file"], native=["text_editor"])


# ---- bash: one shell per conversation ---------------------------------------------------------


def test_the_shell_keeps_its_folder_and_variables_until_restarted(tools: AnthropicTools) -> None:
    ws = tools.router.builtin_context("bash").workspace
    (ws / "sub").mkdir()
    assert text(tools, "bash", command="cd sub && export GREETING=hello") == ""
    assert text(tools, "bash", command="pwd; echo $GREETING") == f"{ws / 'sub'}\nhello"
    assert text(tools, "bash", command="echo out; echo err >&2") == "out\nerr"
    assert text(tools, "bash", restart=True) == "tool has been restarted."
    assert text(tools, "bash", command="pwd; echo [$GREETING]") == f"{ws}\n[]"
    assert error(tools, "bash", command="   ") == "no command provided."


def test_a_commands_last_stderr_is_never_left_for_the_next(tools: AnthropicTools) -> None:
    # stdout and stderr are read apart: stdout's end alone once came before stderr's last line.
    for round_ in range(15):
        assert text(tools, "bash", command=f"echo out{round_}; echo err{round_} >&2") == f"out{round_}\nerr{round_}"


def test_a_command_that_closes_stderr_still_returns(tools: AnthropicTools) -> None:
    tools.session.STDERR_GRACE = 0.2
    assert text(tools, "bash", command="echo before >&2; exec 2>&-; echo out") == "out\nbefore"
    assert text(tools, "bash", command="echo still here") == "still here"


def test_a_command_that_never_returns_times_out_and_the_next_gets_a_fresh_shell(tools: AnthropicTools) -> None:
    tools.session.timeout = 1.0
    text(tools, "bash", command="export MARK=old")
    assert error(tools, "bash", command="sleep 30").startswith("timed out: bash has not returned in 1 seconds")
    assert text(tools, "bash", command="echo [$MARK]") == "[]"
    assert error(tools, "bash", command="exit 3; echo never") == "bash has exited with code 3 and must be restarted"
    assert text(tools, "bash", command="echo after exit") == "after exit"  # a fresh shell


def test_the_shell_is_the_allowlists_bash_with_its_sandbox() -> None:
    from _serve_helpers import outside_tmp

    from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind

    try:
        resolve_kind("on")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")
    base = outside_tmp()  # (a sandbox replaces /tmp: a write there would prove nothing)
    try:
        ws = base / "ws"
        ws.mkdir()
        outside = base / "outside.txt"
        with ToolRouter(context=BuiltInToolContext(ws, sandbox="on")) as router:
            tools = AnthropicTools(router, functions=["bash"], native=["bash"])
            answer = text(tools, "bash", command=f"echo x > {outside} || echo refused")
            tools.close()
        assert answer.startswith("refused") and not outside.exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- the text editor, in its documented words -------------------------------------------------


def test_view_shows_a_file_numbered_and_a_folder_two_levels_deep(tools: AnthropicTools) -> None:
    ws = tools.router.builtin_context(EDITOR).workspace
    (ws / "a.py").write_text("one\ntwo\nthree\n")
    (ws / "pkg" / "deep").mkdir(parents=True)
    (ws / "pkg" / "m.py").write_text("")
    (ws / "pkg" / "deep" / "too_deep.py").write_text("")
    (ws / ".hidden").write_text("")
    assert text(tools, EDITOR, command="view", path=str(ws / "a.py")) == (
        f"Here's the result of running `cat -n` on {ws / 'a.py'}:\n     1\tone\n     2\ttwo\n     3\tthree\n"
    )
    assert text(tools, EDITOR, command="view", path=str(ws / "a.py"), view_range=[2, -1]).endswith(
        "     2\ttwo\n     3\tthree\n"
    )
    assert text(tools, EDITOR, command="view", path=str(ws / "a.py"), view_range=[2, 2]).endswith(":\n     2\ttwo\n")
    listing = text(tools, EDITOR, command="view", path=str(ws))
    assert listing == (
        f"Here's the files and directories up to 2 levels deep in {ws}, excluding hidden items:\n"
        f"{ws}\n{ws}/a.py\n{ws}/pkg\n{ws}/pkg/deep\n{ws}/pkg/m.py\n"
    )
    bad = error(tools, EDITOR, command="view", path=str(ws / "a.py"), view_range=[0, 2])
    assert (
        bad
        == "Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 4]"
    )
    assert "second element `9` should be smaller" in error(
        tools, EDITOR, command="view", path=str(ws / "a.py"), view_range=[1, 9]
    )
    assert error(tools, EDITOR, command="view", path=str(ws / "a.py"), view_range=[1]) == (
        "Invalid `view_range`. It should be a list of two integers."
    )
    assert error(tools, EDITOR, command="view", path="a.py").startswith(
        "The path a.py is not an absolute path, it should start with `/`."
    )
    assert error(tools, EDITOR, command="view", path=str(ws / "none.py")) == (
        f"The path {ws / 'none.py'} does not exist. Please provide a valid path."
    )


def test_view_honours_max_characters(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(1000)))
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as router:
        tools = AnthropicTools(
            router, functions=["read_file", "write_file", "edit"], native=["text_editor"], max_characters=500
        )
        assert {"type": "text_editor_20250728", "name": EDITOR, "max_characters": 500} in tools.anthropic_tools()
        shown = text(tools, EDITOR, command="view", path=str(tmp_path / "big.txt"))
    assert len(shown) < 700 and "line 0" in shown and "line 999" not in shown


def test_create_str_replace_and_insert_speak_the_native_words(tools: AnthropicTools) -> None:
    ws = tools.router.builtin_context(EDITOR).workspace
    path = str(ws / "m.py")
    assert text(
        tools, EDITOR, command="create", path=path, file_text="def f():\n\treturn 1\n\ndef g():\n\treturn 1\n"
    ) == (f"File created successfully at: {path}")
    assert error(tools, EDITOR, command="create", path=path, file_text="x") == (
        f"File already exists at: {path}. Cannot overwrite files using command `create`."
    )
    assert error(tools, EDITOR, command="str_replace", path=path, old_str="return 9", new_str="x") == (
        f"No replacement was performed, old_str `return 9` did not appear verbatim in {path}."
    )
    assert error(tools, EDITOR, command="str_replace", path=path, old_str="return 1", new_str="x") == (
        "No replacement was performed. Multiple occurrences of old_str `return 1` in lines [2, 5]. "
        "Please ensure it is unique"
    )
    edited = text(
        tools, EDITOR, command="str_replace", path=path, old_str="g():\n\treturn 1", new_str="g():\n\treturn 2"
    )
    assert edited.startswith(
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
    )
    assert "     5\t\treturn 2" in edited and edited.endswith("Edit the file again if necessary.")
    # insert takes insert_text (and new_str, as some models send it); tabs are kept.
    assert "     1\timport os" in text(
        tools, EDITOR, command="insert", path=path, insert_line=0, insert_text="import os"
    )
    text(tools, EDITOR, command="insert", path=path, insert_line=7, new_str="# end")
    assert (ws / "m.py").read_text() == "import os\ndef f():\n\treturn 1\n\ndef g():\n\treturn 2\n\n# end"
    assert error(tools, EDITOR, command="insert", path=path, insert_line=99, insert_text="x") == (
        "Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 8]"
    )
    assert error(tools, EDITOR, command="undo_edit", path=path).startswith("Unrecognized command undo_edit.")


def test_the_editor_stays_in_the_workspace(tools: AnthropicTools, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOP-SECRET-BYTES")
    viewed = use(tools, EDITOR, command="view", path=str(tmp_path / "secret.txt"))
    assert viewed.get("is_error") and "TOP-SECRET-BYTES" not in viewed["content"]
    assert use(tools, EDITOR, command="create", path=str(tmp_path / "planted.txt"), file_text="x")["is_error"]
    assert not (tmp_path / "planted.txt").exists()


# ---- memory, step by step against the SDK's reference ----------------------------------------

SESSION: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\nlikes coffee\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "create", "path": "/memories/projects/toolroute.md", "file_text": "router\nrust\nrouter\n"},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/projects/toolroute.md", "view_range": [2, -1]},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "coffee", "new_str": "tea"},
    {"command": "str_replace", "path": "/memories/projects/toolroute.md", "old_str": "router", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "absent", "new_str": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "- prefers mornings\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 42, "insert_text": "x"},
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work/projects"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/work/projects/toolroute.md"},
    {"command": "view", "path": "/memories"},
    {"command": "delete", "path": "/memories/work/projects/toolroute.md"},
    {"command": "delete", "path": "/memories/missing.md"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/memories/../escape"},
    {"command": "view", "path": "/elsewhere/x"},
    {"command": "view", "path": "/memories"},
]


def _answer(tool: Any, command: dict[str, Any]) -> tuple[bool, str]:
    try:
        return False, str(tool.call(command))
    except ToolError as exc:
        return True, str(exc)


def _tree(root: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root) + "/"] = None
        for name in files:
            found[os.path.relpath(os.path.join(folder, name), root)] = Path(folder, name).read_bytes()
    return found


def test_a_memory_session_matches_the_sdks_reference_step_by_step(tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "reference"))
    ours = MemoryTool(tmp_path / "ours" / "memories")
    for step, command in enumerate(SESSION):
        expected, got = _answer(reference, command), _answer(ours, command)
        assert got == expected, (step, command)
        assert _tree(tmp_path / "ours" / "memories") == _tree(tmp_path / "reference" / "memories"), (step, command)
    modes = {p.stat().st_mode & 0o777 for p in (tmp_path / "ours" / "memories").rglob("*") if p.is_file()}
    assert modes <= {0o600}


def test_memory_never_leads_out_of_its_folder(tmp_path: Path) -> None:
    """A symlink planted in the folder (by anything that writes there) leads nowhere: reads,
    writes and renames through it are refused, the target untouched."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    ours = MemoryTool(tmp_path / "memories")
    (tmp_path / "memories" / "link").symlink_to(tmp_path / "outside")
    for command in (
        {"command": "view", "path": "/memories/link/secret.txt"},
        {"command": "create", "path": "/memories/link/planted.txt", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/link/secret.txt", "old_str": "secret", "new_str": "x"},
        {"command": "rename", "old_path": "/memories/link/secret.txt", "new_path": "/memories/stolen.txt"},
        {"command": "view", "path": "/memories/../outside/secret.txt"},
    ):
        failed, answer = _answer(ours, command)
        assert failed and "secret\n" not in answer, (command, answer)
    assert (tmp_path / "outside" / "secret.txt").read_text() == "secret\n"
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.txt"]


def _memory_block(block_id: str, **arguments: Any) -> Any:
    return types.SimpleNamespace(type="tool_use", id=block_id, name="memory", input=arguments)


def test_memory_writes_wait_for_approval_like_the_other_native_tools(tmp_path: Path) -> None:
    """needs_approval=True holds bash and the editor; it holds a memory write too (a view runs),
    and the held write leaves no file until its id is approved."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with ToolRouter(context=BuiltInToolContext(ws)) as router:
        adapter = AnthropicTools(
            router, functions=["bash"], native=["memory"], memory=tmp_path / "memory", needs_approval=True
        )
        write = _memory_block("toolu_w", command="create", path="/memories/notes.txt", file_text="hi\n")
        view = _memory_block("toolu_v", command="view", path="/memories")
        assert [p["id"] for p in adapter.pending_approvals([write, view])] == ["toolu_w"]
        held, viewed = adapter.tool_results([write, view])
        assert held["is_error"] is True and "approval" in str(held["content"])
        assert not viewed.get("is_error"), viewed
        assert not (tmp_path / "memory" / "notes.txt").exists()
        (done,) = adapter.tool_results([write], approved={"toolu_w"})
        assert not done.get("is_error"), done
        assert (tmp_path / "memory" / "notes.txt").read_text() == "hi\n"


@pytest.mark.parametrize(
    ("rule", "held"),
    [
        (False, []),
        (["memory"], ["toolu_w", "toolu_v", "toolu_d"]),
        (["bash"], []),
        (lambda name, args: name == "memory" and args.get("command") == "delete", ["toolu_d"]),
    ],
)
def test_a_memory_rule_is_asked_with_the_name_memory(tmp_path: Path, rule: Any, held: list[str]) -> None:
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as router:
        adapter = AnthropicTools(router, functions=["bash"], native=["memory"], memory="mem", needs_approval=rule)
        blocks = [
            _memory_block("toolu_w", command="create", path="/memories/a.txt", file_text="a"),
            _memory_block("toolu_v", command="view", path="/memories"),
            _memory_block("toolu_d", command="delete", path="/memories/a.txt"),
        ]
        assert [p["id"] for p in adapter.pending_approvals(blocks)] == held


def test_a_relative_memory_folder_is_beneath_the_workspace_not_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "cwd"
    ws.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with ToolRouter(context=BuiltInToolContext(ws)) as router:
        adapter = AnthropicTools(router, functions=["bash"], native=["memory"], memory="notes/memory")
        (answer,) = adapter.tool_results(
            [_memory_block("toolu_1", command="create", path="/memories/a.txt", file_text="kept\n")]
        )
        assert not answer.get("is_error"), answer
    assert (ws / "notes" / "memory" / "a.txt").read_text() == "kept\n"
    assert list(elsewhere.iterdir()) == []


def test_a_relative_memory_folder_that_leads_out_is_refused(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    with ToolRouter(context=BuiltInToolContext(ws)) as router:
        for folder in ("../outside", "link", "link/memory"):
            with pytest.raises(ValueError, match="leads out of the workspace"):
                AnthropicTools(router, functions=["bash"], native=["memory"], memory=folder)
    assert list(outside.iterdir()) == []
    with ToolRouter() as bare, pytest.raises(ValueError, match="no workspace"):
        AnthropicTools(bare, functions=["bash"], native=["memory"], memory="memory")
