"""The shell-aware approval rule (issue 14, item 16): every command must be allowed and literal."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("tree_sitter_bash", reason="the shell rule needs the 'shell' extra (tree-sitter-bash)")

from toolroute.agent import AgentToolCall, Decision, Rule, RulePolicy, ShellCommands, Verdict, allow_shell_commands
from toolroute.agent.shell_rule import UnprovableShell, _parse, simple_commands

ALLOWED = ("ls", "pwd", "git status", "git diff", "git log")
RULE = ShellCommands(ALLOWED)
OLD_REGEX = re.compile(r"^(ls|pwd|git (status|diff|log))\b")  # what docs/agent.md showed before

APPROVED = [
    "ls",
    "ls -la src",
    "pwd",
    "git status --short",
    "git diff --stat HEAD~1",
    "git log --oneline -5",
    "ls && pwd",
    "git status; git diff",
    "ls | git log",
    "pwd\nls",
    "ls 'a b' \"c d\"",
    "ls -- -x",
    "ls # a comment",
]

# Each slips past the old regex; none may be approved.
BYPASSES = [
    "ls; touch X",
    "ls && touch X",
    "ls || touch X",
    "pwd\ntouch X",
    "git log $(touch X)",
    "git log `touch X`",
    "ls ${IFS}x",
    "ls $HOME",
    'ls "$(touch X)"',
    "ls $'\\x41'",
    "ls <(touch X)",
    "ls > X",
    "ls 2>X",
    "ls >> X",
    "ls <<EOF\nx\nEOF",
    "ls <<< x",
    "ls | tee X",
    "ls & touch X",
    "ls &",
    "ls |& cat",
    "(touch X)",
    "ls; (touch X)",
    "{ ls; touch X; }",
    "PAGER=touch git log",
    "GIT_EXTERNAL_DIFF=x git diff",
    "git -c core.pager=touch log",
    "git --paginate log",
    "git log --output=X",
    "git diff --output X",
    "git diff --ext-diff",
    "git log --textconv -p",
    "ls *",
    "ls {a,b}",
    "l\\s",
    "ls\\\ntouch X",
    "ls\rtouch X",
    "if true; then touch X; fi",
    "for f in a; do touch $f; done",
    "f() { touch X; }; f",
    "ls;;",
    "ls &&",
    "git status\nrm -rf ~",
    "time touch X",
    "exec ls",
    "eval ls",
    "ls'",
]


@pytest.mark.parametrize("script", APPROVED)
def test_plain_allowed_commands_are_approved(script: str) -> None:
    assert RULE.refusal(script) is None


@pytest.mark.parametrize("script", BYPASSES)
def test_bypasses_are_not_approved(script: str) -> None:
    assert RULE.refusal(script) is not None
    assert not RULE(script)


def test_the_old_regex_let_the_four_reported_bypasses_through() -> None:
    for script in ("ls; touch X", "ls && touch X", "pwd\ntouch X", "git log $(touch X)"):
        assert OLD_REGEX.search(script) and not RULE(script)


def test_a_bypass_really_runs_its_second_command_in_bash(tmp_path: Path) -> None:
    """The rule reads scripts as bash does: the refused script writes, the approved one does not."""
    for script in ("ls; touch X", "pwd\ntouch X", "ls $(touch X)"):
        (tmp_path / "X").unlink(missing_ok=True)
        subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, timeout=10, check=False)
        assert (tmp_path / "X").exists() and not RULE(script)


def test_the_argv_is_what_bash_would_pass() -> None:
    assert simple_commands("git log --format='%h %s' \"a b\"c") == [["git", "log", "--format=%h %s", "a bc"]]


def test_non_strings_and_parse_errors_are_refused() -> None:
    assert not RULE(["ls"])
    assert not RULE(None)
    with pytest.raises(UnprovableShell, match="does not parse"):
        simple_commands("ls 'unterminated")
    with pytest.raises(UnprovableShell):
        simple_commands("   ")


def test_in_a_policy_an_unapproved_script_falls_through_to_ask() -> None:
    ask = Rule("bash", Verdict.ASK, "needs a human")
    policy = RulePolicy([allow_shell_commands(ALLOWED), ask], Decision.deny("unreachable"))
    assert policy.decide(AgentToolCall("bash", '{"command": "git status"}')).verdict is Verdict.ALLOW
    assert policy.decide(AgentToolCall("bash", '{"command": "ls; touch X"}')).verdict is Verdict.ASK
    assert policy.decide(AgentToolCall("bash", '{"action": "stop", "process_id": "p1"}')).verdict is Verdict.ASK
    assert policy.decide(AgentToolCall("bash", "not json")).verdict is Verdict.ASK


def test_an_empty_allowed_entry_is_refused() -> None:
    with pytest.raises(ValueError):
        ShellCommands(("ls", " "))


shell_text = st.lists(
    st.sampled_from([*"lsgitpwdoaX \t\n;&|<>()$`'\"\\{}*?[]=#-~!", "ls", "git log", "pwd", " -x"]), max_size=30
).map("".join)


@settings(max_examples=400, deadline=None)
@given(script=shell_text)
def test_a_script_the_parser_fails_on_is_never_approved(script: str) -> None:
    if _parse(script).has_error:
        assert not RULE(script)


@settings(max_examples=300, deadline=None)
@given(script=shell_text)
def test_an_approved_script_has_no_shell_metacharacters_outside_quotes(script: str) -> None:
    if not RULE(script):
        return
    unquoted = re.sub(r"'[^']*'|\"[^\"$`\\\\]*\"", "", script)
    unquoted = re.sub(r"#[^\n]*", "", unquoted)
    assert not set(unquoted) & set("<>()$`\\{}*?[]"), script
    assert re.search(r"(?<![&|])&(?![&])", unquoted) is None, script
