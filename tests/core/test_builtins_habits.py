"""Parameter names models bring from Claude Code, Codex and Gemini CLI (issue 14, item 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolroute import BUILTIN_TOOL_NAMES, ToolArgumentError, ToolRouter
from toolroute.builtins import builtin_tools
from toolroute.builtins.habits import HABITS, Rename, translate


def run(router: ToolRouter, tool: str, args: dict[str, Any]) -> str:
    return router.execute(tool, args).text


def bash_json(router: ToolRouter, args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(run(router, "bash", args))
    return out


# ---- the schemas stay toolroute's own ----------------------------------------------------------


def test_no_habit_is_advertised_and_extra_keys_stay_forbidden(router: ToolRouter) -> None:
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in router.get_all_tools(list(BUILTIN_TOOL_NAMES))}
    for tool, habits in HABITS.items():
        params = tools[tool]
        assert params["additionalProperties"] is False
        for habit in habits:
            if isinstance(habit, Rename) or habit.habit not in ("timeout", "command"):
                assert habit.habit not in params["properties"], (tool, habit.habit)


def test_every_table_entry_names_a_builtin_and_a_real_field() -> None:
    for tool, habits in HABITS.items():
        model = builtin_tools()[tool].request_model
        for habit in habits:
            if isinstance(habit, Rename):
                assert habit.canonical in model.model_fields, (tool, habit.canonical)


def test_unknown_keys_are_still_refused(router: ToolRouter, ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    with pytest.raises(ToolArgumentError, match="filepath"):
        run(router, "read_file", {"filepath": "a.txt"})


# ---- files ----------------------------------------------------------------------------------


def test_file_path_reads_writes_and_edits(router: ToolRouter, ws: Path) -> None:
    run(router, "write_file", {"file_path": "a.txt", "content": "one\ntwo\n"})
    assert (ws / "a.txt").read_text() == "one\ntwo\n"
    run(router, "edit", {"file_path": "a.txt", "old_string": "two", "new_string": "three"})
    assert (ws / "a.txt").read_text() == "one\nthree\n"
    assert "three" in run(router, "read_file", {"file_path": "a.txt", "offset": 2, "limit": 1})


def test_gemini_absolute_path_reads(router: ToolRouter, ws: Path) -> None:
    (ws / "g.txt").write_text("gemini\n")
    assert "gemini" in run(router, "read_file", {"absolute_path": str(ws / "g.txt")})


def test_both_spellings_at_once_are_refused_not_guessed(router: ToolRouter, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    with pytest.raises(ToolArgumentError, match="file_path"):
        run(router, "read_file", {"path": "a.txt", "file_path": "b.txt"})


def test_ai4j_aliases_still_work(router: ToolRouter, ws: Path) -> None:
    (ws / "a.txt").write_text("1\n2\n3\n")
    assert run(router, "read_file", {"path": "a.txt", "startLine": 2, "endLine": 2}).count("\n") <= 2
    run(router, "edit", {"path": "a.txt", "old_string": "2", "new_string": "4", "replaceAll": True})
    assert (ws / "a.txt").read_text() == "1\n4\n3\n"


# ---- bash -----------------------------------------------------------------------------------


def test_claude_bash_description_is_dropped(bash: ToolRouter) -> None:
    out = bash_json(bash, {"command": "echo hi", "description": "Print hi"})
    assert out["stdout"] == "hi\n"


def test_claude_bash_timeout_is_milliseconds_when_a_claude_key_is_present(bash: ToolRouter) -> None:
    out = bash_json(bash, {"command": "sleep 5", "timeout": 300, "description": "wait"})
    assert out["timedOut"] is True  # 300 ms, not 300 s


def test_a_bare_timeout_stays_seconds(bash: ToolRouter) -> None:
    out = bash_json(bash, {"command": "sleep 0.5; echo done", "timeout": 30})
    assert out["timedOut"] is False and out["stdout"] == "done\n"


def test_claude_run_in_background_starts_a_process(bash: ToolRouter) -> None:
    started = bash_json(bash, {"command": "echo bg", "run_in_background": True, "description": "bg"})
    assert "processId" in started
    bash.execute("bash", {"action": "stop", "process_id": started["processId"]})
    ran = bash_json(bash, {"command": "echo fg", "run_in_background": False})
    assert ran["stdout"] == "fg\n"


def test_codex_shell_argv_workdir_and_timeout_ms(bash: ToolRouter, ws: Path) -> None:
    (ws / "sub").mkdir()
    out = bash_json(bash, {"command": ["bash", "-lc", "pwd"], "workdir": "sub", "timeout_ms": 10_000})
    assert Path(out["stdout"].strip()).resolve() == (ws / "sub").resolve()
    plain = bash_json(bash, {"command": ["echo", "a b", "c"]})
    assert plain["stdout"] == "a b c\n"
    slow = bash_json(bash, {"command": ["sleep", "5"], "timeout_ms": 300})
    assert slow["timedOut"] is True


def test_gemini_shell_dir_path(bash: ToolRouter, ws: Path) -> None:
    (ws / "d").mkdir()
    out = bash_json(bash, {"command": "pwd", "dir_path": "d", "description": "where"})
    assert Path(out["stdout"].strip()).resolve() == (ws / "d").resolve()


# ---- search ---------------------------------------------------------------------------------


@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("needle = 1\n")
    (ws / "src" / "b.txt").write_text("needle\n")
    (ws / "other.py").write_text("needle = 2\n")
    return ws


def test_gemini_grep_dir_path_and_include_pattern(router: ToolRouter, tree: Path) -> None:
    out = run(router, "grep", {"pattern": "needle", "dir_path": "src", "include_pattern": "*.py"})
    assert "a.py" in out and "b.txt" not in out and "other.py" not in out


def test_claude_grep_dash_n_is_accepted(router: ToolRouter, tree: Path) -> None:
    out = run(router, "grep", {"pattern": "needle", "path": "src", "-n": True, "-i": True, "glob": "*.py"})
    assert "a.py" in out and ":1:" in out


def test_gemini_glob_dir_path(router: ToolRouter, tree: Path) -> None:
    out = run(router, "glob", {"pattern": "*.py", "dir_path": "src"})
    assert "a.py" in out and "other.py" not in out


# ---- the table itself -----------------------------------------------------------------------


def test_translate_leaves_other_tools_and_non_objects_alone() -> None:
    assert translate("apply_patch", {"file_path": "x"}) == {"file_path": "x"}
    assert translate("bash", "not a mapping") == "not a mapping"
    original = {"file_path": "x"}
    assert translate("read_file", original) == {"path": "x"}
    assert original == {"file_path": "x"}  # the caller's mapping is not modified


def test_a_claude_timeout_beside_timeout_ms_is_left_for_validation() -> None:
    args = translate("bash", {"command": "x", "timeout": 5, "timeout_ms": 10, "description": "d"})
    assert args == {"command": "x", "timeout": 5, "timeout_ms": 10}


def test_run_in_background_with_another_action_is_left_for_validation() -> None:
    args = translate("bash", {"action": "status", "run_in_background": True})
    assert args == {"action": "status", "run_in_background": True}
