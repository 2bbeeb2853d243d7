"""OpenAI's native coding tool types, answered by toolroute's built-ins (issue 41).

The V4A operations of `apply_patch_call` against openai-agents' own reference (`apply_diff`, the
diff its editors apply), case by case; every call item of a response answered exactly once, in
order, with items the SDK's own input types accept (a property test over any mix of types);
`shell_call`, `local_shell_call` and Codex's freeform `apply_patch` through the allowlist, in the
context's confinement and sandbox.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents.apply_diff import apply_diff
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseInputItemParam
from pydantic import TypeAdapter

from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context
from toolroute.adapters.openai import OpenAITools, UnansweredCall

INPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)

# (file text, V4A update diff): every case is applied by the reference and by toolroute.
UPDATES = {
    "replace": ("a\nb\nc\n", "@@\n a\n-b\n+B\n c\n"),
    "two_chunks": ("1\n2\n3\n4\n5\n6\n", "@@\n 1\n-2\n+two\n@@\n 5\n-6\n+six\n"),
    "anchor_found": ("class A:\n  x=1\nclass B:\n  x=1\n", "@@ class B:\n-  x=1\n+  x=2\n"),
    "anchor_missing": ("a\nb\nc\n", "@@ def nowhere():\n a\n-b\n+B\n"),
    "stacked_anchors": (
        "class A:\n  def f():\n    x=1\nclass B:\n  def f():\n    x=1\n",
        "@@ class B:\n@@   def f():\n-    x=1\n+    x=2\n",
    ),
    "trailing_whitespace": ("a  \nb\nc\n", "@@\n a\n-b\n+B\n"),
    "leading_whitespace": ("    a\nb\n", "@@\n a\n-b\n+B\n"),
    "end_of_file": ("x\ny\nx\n", "@@\n-x\n+z\n*** End of File\n"),
    "addition_at_the_top": ("a\nb\n", "@@\n+first\n"),
    "first_chunk_without_marker": ("a\nb\n", " a\n-b\n+B\n"),
    "deletion_only": ("a\nb\nc\n", "@@\n a\n-b\n c\n"),
    "crlf_file": ("a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n c\n"),
    "no_final_newline": ("a\nb", "@@\n a\n-b\n+B\n"),
    "no_final_newline_append": ("a\nb", "@@\n a\n b\n+c\n"),
    "append_at_end": ("a\nb\n", "@@\n b\n+c\n*** End of File\n"),
    "empty_context_line": ("a\n\nb\n", "@@\n a\n \n-b\n+B\n"),
    "blank_diff_line": ("a\n\nb\n", "@@\n a\n\n-b\n+B\n"),
    "anchor_then_addition": ("def f():\n  pass\ndef g():\n  pass\n", "@@ def g():\n+  # doc\n"),
    "sections_in_order": ("a\nb\nc\nd\n", "@@\n-a\n+A\n@@\n-c\n+C\n"),
    "crlf_diff": ("a\nb\n", "@@\r\n a\r\n-b\r\n+B\r\n"),
    "last_line_without_newline": ("x\ny", "@@\n-y\n+Y\n*** End of File\n"),
    "indentation_change": ("a\n  b\n", "@@\n a\n-  b\n+    b\n"),
    "unicode_text": ("größe = 1\nnaïve\n", "@@\n größe = 1\n-naïve\n+naive\n"),
    # Both refuse these:
    "context_not_found": ("a\nb\n", "@@\n-zzz\n+y\n"),
    "invalid_line": ("a\nb\n", "@@\n a\nbogus\n"),
}
CREATES = {
    "create": "+hello\n+world\n",
    "create_blank_lines": "+a\n+\n+b\n",
    "create_crlf": "+a\r\n+b\r\n",
    "create_empty": "",
    "create_bad_line": "+a\nb\n",
}
# Deliberate differences (docs/native.md): toolroute also matches context that differs only in
# Unicode punctuation (Codex's fourth tier), where the reference fails.
LENIENT = {"unicode_punctuation": ("say \u201chi\u201d\nb\n", '@@\n say "hi"\n-b\n+B\n')}


def _router(ws: Path, **context: Any) -> ToolRouter:
    return ToolRouter(context=BuiltInToolContext(ws, **context))


def _reference(text: str, diff: str, mode: str = "default") -> str | None:
    try:
        return apply_diff(text, diff, mode=mode)  # type: ignore[arg-type]
    except ValueError:
        return None


def _ours(ws: Path, operation: dict[str, Any]) -> tuple[str, str | None]:
    """(status, the file's text after) for one `apply_patch_call`."""
    with _router(ws) as router:
        tools = OpenAITools(router, functions=["apply_patch"], native=["apply_patch"])
        (answer,) = tools.call_outputs([_call("apply_patch_call", operation=operation)])
    INPUT_ITEM.validate_python(answer)
    path = ws / operation["path"]
    return answer["status"], path.read_bytes().decode() if path.exists() else None


def _call(kind: str, **fields: Any) -> dict[str, Any]:
    call_id = f"call_{uuid.uuid4().hex[:8]}"
    return {"type": kind, "id": f"id_{call_id}", "call_id": call_id, "status": "completed", **fields}


@pytest.mark.parametrize("case", list(UPDATES))
def test_an_update_as_openais_reference_applies_it(case: str, tmp_path: Path) -> None:
    text, diff = UPDATES[case]
    (tmp_path / "f.txt").write_bytes(text.encode())
    status, after = _ours(tmp_path, {"type": "update_file", "path": "f.txt", "diff": diff})
    expected = _reference(text, diff)
    if expected is None:
        assert status == "failed" and after == text  # refused, and nothing changed
    else:
        assert status == "completed" and after == expected


@pytest.mark.parametrize("case", list(CREATES))
def test_a_create_as_openais_reference_makes_it(case: str, tmp_path: Path) -> None:
    diff = CREATES[case]
    status, after = _ours(tmp_path, {"type": "create_file", "path": "new/f.txt", "diff": diff})
    expected = _reference("", diff, "create")
    assert (status, after) == (("failed", None) if expected is None else ("completed", expected))


@pytest.mark.parametrize("case", list(LENIENT))
def test_deliberate_differences_apply_where_the_reference_fails(case: str, tmp_path: Path) -> None:
    text, diff = LENIENT[case]
    (tmp_path / "f.txt").write_text(text)
    assert _reference(text, diff) is None
    status, after = _ours(tmp_path, {"type": "update_file", "path": "f.txt", "diff": diff})
    assert status == "completed" and after == text.replace("b\n", "B\n")


def test_create_over_an_existing_file_fails_as_the_reference_does(tmp_path: Path) -> None:
    """openai-agents' editor refuses to create a file that exists (toolroute's Codex patch
    `Add File` replaces it): the V4A operation keeps the file, and says to update it instead."""
    (tmp_path / "f.txt").write_text("mine\n")
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["apply_patch"])
        (answer,) = tools.call_outputs(
            [_call("apply_patch_call", operation={"type": "create_file", "path": "f.txt", "diff": "+x"})]
        )
    assert answer["status"] == "failed" and "already exists" in answer["output"] and "update_file" in answer["output"]
    assert (tmp_path / "f.txt").read_text() == "mine\n"


def test_delete_and_update_of_a_missing_file_fail(tmp_path: Path) -> None:
    for operation in (
        {"type": "delete_file", "path": "gone.txt"},
        {"type": "update_file", "path": "gone.txt", "diff": "@@\n-a\n+b\n"},
    ):
        status, after = _ours(tmp_path, operation)
        assert status == "failed" and after is None


def test_the_operations_of_one_response_apply_together_when_asked(tmp_path: Path) -> None:
    """A three-file change whose third operation fails: with `all_or_nothing`, none is applied
    (openai-agents' `unix_local` left the first two written); without, each stands alone."""
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "b.txt").write_text("b\n")
    operations = [
        {"type": "update_file", "path": "a.txt", "diff": "@@\n-a\n+A\n"},
        {"type": "create_file", "path": "c.txt", "diff": "+c"},
        {"type": "update_file", "path": "b.txt", "diff": "@@\n-missing\n+x\n"},
    ]
    items = [_call("apply_patch_call", operation=op) for op in operations]
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["apply_patch"])
        together = tools.call_outputs(items, all_or_nothing=True)
        assert [a["status"] for a in together] == ["failed"] * 3
        assert all("none was" in a["output"] for a in together)
        assert (tmp_path / "a.txt").read_text() == "a\n" and not (tmp_path / "c.txt").exists()
        alone = tools.call_outputs(items)
    assert [a["status"] for a in alone] == ["completed", "completed", "failed"]
    assert [a["output"] for a in alone[:2]] == ["Updated a.txt", "Created c.txt"]
    assert (tmp_path / "a.txt").read_text() == "A\n" and (tmp_path / "c.txt").read_text() == "c"


# ---- shell, local_shell, freeform apply_patch ---------------------------------------------------


def test_a_shell_call_runs_each_command_in_order_with_its_limits(tmp_path: Path) -> None:
    action = {
        "commands": ["echo one > f; echo out; echo err >&2", "cat f; exit 3", "sleep 30", "seq 1 100000"],
        "timeout_ms": 1500,
        "max_output_length": 200,
    }
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["bash"], native=["shell"])
        (answer,) = tools.call_outputs([_call("shell_call", action=action)])
    INPUT_ITEM.validate_python(answer)
    first, second, slow, chatty = answer["output"]
    assert (first["stdout"], first["stderr"], first["outcome"]) == ("out\n", "err\n", {"type": "exit", "exit_code": 0})
    assert second["stdout"] == "one\n" and second["outcome"] == {"type": "exit", "exit_code": 3}
    assert slow["outcome"] == {"type": "timeout"}
    assert len(chatty["stdout"]) <= 200 and "max_output_length" in chatty["stdout"]
    assert answer["max_output_length"] == 200


def test_a_local_shell_call_runs_its_argv_as_given(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    action = {
        "type": "exec",
        "command": ["sh", "-c", 'printf "%s|" "$1" "$GREETING"; pwd', "sh", "two words; rm -rf /"],
        "env": {"GREETING": "hello there"},
        "working_directory": "sub",
    }
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["bash"], native=["local_shell"])
        (answer,) = tools.call_outputs([_call("local_shell_call", action=action)])
        INPUT_ITEM.validate_python(answer)
        result = json.loads(answer["output"])
        assert result["output"] == f"two words; rm -rf /|hello there|{(tmp_path / 'sub').resolve()}\n"
        assert result["metadata"]["exit_code"] == 0
        outside = {**action, "command": ["true"], "working_directory": "/"}
        (refused,) = tools.call_outputs([_call("local_shell_call", action=outside)])
    assert json.loads(refused["output"])["metadata"]["exit_code"] == 126  # outside the roots


def test_codex_freeform_apply_patch_and_chat_custom_calls(tmp_path: Path) -> None:
    from openai.types.chat import ChatCompletionMessage

    patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch"
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["apply_patch"], native=["custom_apply_patch"])
        declared = tools.responses_tools()
        assert declared == [
            {"type": "custom", "name": "apply_patch", "description": declared[0]["description"]}  # type: ignore[typeddict-item]
        ]
        (answer,) = tools.call_outputs(
            [{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": patch}]
        )
        assert answer["output"].endswith("A b.txt") and (tmp_path / "b.txt").read_text() == "b\n"
        second = patch.replace("b.txt", "c.txt")
        message = ChatCompletionMessage.model_validate(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": patch.replace("b.txt", "c.txt")},
                    },
                    {"id": "t2", "type": "custom", "custom": {"name": "other", "input": "x"}},
                ],
            }
        )
        first, second = tools.tool_messages(message)
    assert (tmp_path / "c.txt").read_text() == "b\n" and first["tool_call_id"] == "t1"
    assert second["content"].startswith("Error:") and "not served" in second["content"]


def test_native_calls_keep_the_allowlist_and_the_sandbox(tmp_path: Path) -> None:
    """A native type runs only as its exposed built-in; under a sandbox a shell call writes
    nowhere but the workspace and sees no host secret (openai-agents' unix_local did both)."""
    from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind

    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["read_file"])
        patch, shell = tools.call_outputs(
            [
                _call("apply_patch_call", operation={"type": "create_file", "path": "x.txt", "diff": "+x"}),
                _call("shell_call", action={"commands": ["touch y.txt"]}),
            ]
        )
    assert patch["status"] == "failed" and "not available" in patch["output"]
    assert shell["output"][0]["outcome"]["exit_code"] == 126 and not (tmp_path / "y.txt").exists()
    try:
        resolve_kind("on")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    os.environ["OPENAI_API_KEY"] = "sk-host-secret-123"
    try:
        with _router(ws, sandbox="on") as router, builtin_tool_context(BuiltInToolContext(ws, sandbox="on")):
            tools = OpenAITools(router, functions=["bash"], native=["shell"])
            (answer,) = tools.call_outputs(
                [_call("shell_call", action={"commands": [f"echo x > {outside}; echo key=$OPENAI_API_KEY"]})]
            )
    finally:
        del os.environ["OPENAI_API_KEY"]
    assert not outside.exists()
    assert "sk-host-secret" not in answer["output"][0]["stdout"]


def test_a_call_with_no_error_form_is_named_not_dropped(tmp_path: Path) -> None:
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["read_file"])
        with pytest.raises(UnansweredCall, match="computer_call"):
            tools.call_outputs([_call("computer_call", action={"type": "screenshot"}, pending_safety_checks=[])])


# ---- every call answered once ---------------------------------------------------------------------

ITEM_KINDS = {
    "function_call": lambda: {"name": "read_file", "arguments": json.dumps({"path": "a.txt"})},
    "invented_function": lambda: {"name": "no_such_tool", "arguments": "{}"},
    "apply_patch_call": lambda: {"operation": {"type": "update_file", "path": "a.txt", "diff": "@@\n-zzz\n+y\n"}},
    "shell_call": lambda: {"action": {"commands": ["echo hi"], "timeout_ms": 20000}},
    "local_shell_call": lambda: {"action": {"type": "exec", "command": ["echo", "hi"], "env": {}}},
    "custom_tool_call": lambda: {"name": "apply_patch", "input": "not a patch"},
    "message": None,
    "reasoning": None,
}


def _item(kind: str) -> dict[str, Any]:
    if kind == "message":
        return {"type": "message", "id": "m", "role": "assistant", "status": "completed", "content": []}
    if kind == "reasoning":
        return {"type": "reasoning", "id": "r", "summary": []}
    make = ITEM_KINDS[kind]
    assert make is not None
    real = "function_call" if kind == "invented_function" else kind
    item = _call(real, **make())
    if real in ("function_call", "custom_tool_call"):
        item.pop("status")
    return item


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(list(ITEM_KINDS)), min_size=1, max_size=8))
def test_every_call_of_any_response_is_answered_exactly_once_in_order(tmp_path: Path, kinds: list[str]) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    items = [_item(kind) for kind in kinds]
    response = Response.model_validate(
        {
            "id": "r",
            "created_at": 0,
            "model": "m",
            "object": "response",
            "output": items,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    with _router(tmp_path) as router:
        tools = OpenAITools(router, functions=["read_file", "apply_patch", "bash"], native=["apply_patch", "shell"])
        answers = tools.call_outputs(response)
    asked = [item["call_id"] for item in items if "call_id" in item]
    answered = [answer.get("call_id", answer.get("id")) for answer in answers]
    assert answered == asked
    for answer in answers:
        INPUT_ITEM.validate_python(answer)
