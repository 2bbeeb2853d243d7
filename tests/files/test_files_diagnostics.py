"""Diagnostics after an edit (docs/safe-editing.md, "Diagnostics after an edit"): a configured checker runs
on the files an edit changed, errors are appended to the result and given in the trace."""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolroute import BuiltInToolContext, ToolPreconditionError, ToolRouter, builtin_tool_context
from toolroute.agent import ToolCallRunner, allow_all
from toolroute.diagnostics import Checker, Diagnostics


@pytest.fixture
def ws(deployed: Path) -> Path:
    root = deployed / "ws"
    root.mkdir()
    (root / "mod.py").write_text("def f():\n    return 1\n")
    return root


def router(ws: Path, diagnostics: Diagnostics, **options: object) -> Iterator[ToolRouter]:
    ctx = BuiltInToolContext(ws, durability="none", diagnostics=diagnostics, **options)  # type: ignore[arg-type]
    with builtin_tool_context(ctx):
        r = ToolRouter()
        yield r
        r.close()


PYTHON = Diagnostics((Checker.python_syntax(),))


def test_a_syntax_breaking_edit_is_reported_with_the_checkers_message(ws: Path) -> None:
    for r in router(ws, PYTHON):
        out = r.execute("edit", {"path": "mod.py", "old_string": "return 1", "new_string": "return (1"})
        assert "Diagnostics after this change (1):" in out.text
        assert "[error] python: mod.py:2:" in out.text and "was never closed" in out.text
        assert out.trace["diagnostics"][0]["severity"] == "error"
        assert out.trace["diagnostics"][0]["path"] == "mod.py"
        assert (ws / "mod.py").read_text().endswith("return (1\n")  # told, not refused, by default


def test_a_clean_edit_adds_nothing_and_other_files_are_not_checked(ws: Path) -> None:
    for r in router(ws, PYTHON):
        out = r.execute("edit", {"path": "mod.py", "old_string": "return 1", "new_string": "return 2"})
        assert out.text == "Edited mod.py: 1 replacement at line 2."
        assert "diagnostics" not in out.trace
        notes = r.execute("write_file", {"path": "notes.md", "content": "def (\n"})
        assert "Diagnostics" not in notes.text


def test_a_patch_reports_each_broken_file(ws: Path) -> None:
    patch = (
        "*** Begin Patch\n*** Update File: mod.py\n@@\n-    return 1\n+    return [\n"
        "*** Add File: pkg/new.py\n+x = )\n*** Add File: fine.py\n+y = 1\n*** End Patch\n"
    )
    for r in router(ws, PYTHON):
        out = r.execute("apply_patch", {"patch": patch})
        assert sorted(d["path"] for d in out.trace["diagnostics"]) == ["mod.py", "pkg/new.py"]


def test_warnings_are_told_only_when_asked(ws: Path) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    content = "import os\n\n\ndef f():\n    return 1\n"
    for r in router(ws, Diagnostics((Checker.ruff(ruff),))):
        out = r.execute("write_file", {"path": "mod.py", "content": content})
        assert "Diagnostics" not in out.text  # F401 is a warning
        broken = r.execute("write_file", {"path": "mod.py", "content": "def f(:\n"})
        assert "[error] ruff: mod.py:1:" in broken.text
    for r in router(ws, Diagnostics((Checker.ruff(ruff),), warnings=True)):
        out = r.execute("write_file", {"path": "mod.py", "content": content})
        assert "[warning] ruff: mod.py:1:8: F401" in out.text


def test_the_checkers_time_limit_holds(ws: Path) -> None:
    slow = Checker(f"sleep 30; {shlex.quote(sys.executable)} -c pass", (".py",), name="slow")
    for r in router(ws, Diagnostics((slow,), timeout=0.5, warnings=True)):
        started = time.monotonic()
        out = r.execute("edit", {"path": "mod.py", "old_string": "1", "new_string": "2"})
        assert time.monotonic() - started < 20
        assert "[warning] slow: the checker did not finish within 0.5 s" in out.text


def test_each_file_is_checked_once_per_batch(ws: Path, deployed: Path) -> None:
    log = deployed / "checked.log"
    counting = Checker(f"echo {{path}} >> {shlex.quote(str(log))}; false", (".py",), name="count")
    for r in router(ws, Diagnostics((counting,))):
        runner = ToolCallRunner(r, policy=allow_all())
        results = runner.run(
            [
                {"name": "edit", "arguments": {"path": "mod.py", "old_string": "1", "new_string": "2"}},
                {"name": "edit", "arguments": {"path": "mod.py", "old_string": "2", "new_string": "3"}},
                {"name": "write_file", "arguments": {"path": "other.py", "content": "z = 1\n"}},
            ]
        )
        assert [("Diagnostics" in res.output) for res in results] == [True, False, True]
        assert log.read_text().split() == ["mod.py", "other.py"]
        runner.run([{"name": "edit", "arguments": {"path": "mod.py", "old_string": "3", "new_string": "4"}}])
        assert log.read_text().split() == ["mod.py", "other.py", "mod.py"]  # a new batch checks again


def test_an_edit_that_breaks_syntax_can_be_refused(ws: Path) -> None:
    refusing = Diagnostics((Checker.python_syntax(),), refuse_errors=True)
    for r in router(ws, refusing):
        with pytest.raises(ToolPreconditionError, match=r"change to mod.py was not kept.*mod.py is as it was"):
            r.invoke("edit", {"path": "mod.py", "old_string": "return 1", "new_string": "return (1"})
        assert (ws / "mod.py").read_text() == "def f():\n    return 1\n"
        with pytest.raises(ToolPreconditionError, match="was removed again"):
            r.invoke("write_file", {"path": "new.py", "content": "x = (\n"})
        assert not (ws / "new.py").exists()
        # A file already broken may still be changed (the change does not add the errors).
        (ws / "broken.py").write_text("x = (\n")
        out = r.execute("write_file", {"path": "broken.py", "content": "x = [\n"})
        assert "[error] python" in out.text
        # The refusal did not count as the model's read: a stale edit is still caught.
        r.invoke("read_file", {"path": "mod.py"})
        (ws / "mod.py").write_text("def f():\n    return 5\n")
        with pytest.raises(ToolPreconditionError, match="changed since you last read"):
            r.invoke("edit", {"path": "mod.py", "old_string": "return 5", "new_string": "return (5"})


def test_the_checker_runs_in_the_sandbox(ws: Path, deployed: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    outside = deployed / "outside.txt"
    escaping = Checker(f"echo ran > ran.txt; echo escaped > {shlex.quote(str(outside))}; true", (".py",))
    for r in router(ws, Diagnostics((escaping,)), sandbox="bubblewrap"):
        r.invoke("edit", {"path": "mod.py", "old_string": "1", "new_string": "2"})
    assert (ws / "ran.txt").read_text() == "ran\n"  # it ran, with the workspace writable
    assert not outside.exists()  # and nothing else
