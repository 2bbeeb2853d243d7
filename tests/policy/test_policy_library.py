"""An operator's policy in the library (issue 59): views per caller, argument rules, approval,
overrides, and files refused by line and column. Real built-ins act on a real workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolroute import ToolRouter
from toolroute.allowlist import ExposedTools, OutcomeKind
from toolroute.context import BuiltInToolContext
from toolroute.errors import ApprovalRequiredError, PolicyDeniedError, ToolNotFoundError
from toolroute.policy import Policy, PolicyFileError, Subject, policy_subject
from toolroute.registration import function_tool

SEEN: list[dict[str, Any]] = []


@function_tool
def deploy(service: str, region: str = "eu", token: str = "", dry_run: bool = True) -> str:
    """Deploy a service."""
    SEEN.append({"service": service, "region": region, "token": token, "dry_run": dry_run})
    return f"deployed {service} to {region}"


@function_tool
def purge_database() -> str:
    """Purge the whole database."""
    SEEN.append({"purged": True})
    return "purged"


POLICY = """
default: allow
rules:
  - id: bash-admins-only
    when: tool.name == "bash" && !("admin" in user.claims.roles)
    effect: deny
    reason: bash is for admins
  - id: purge-admins-only
    when: tool.name == "purge_database" && !("admin" in user.claims.roles)
    effect: deny
  - id: no-secrets
    when: tool.name in ["read_file", "write_file"] && args.path.startsWith("secrets/")
    effect: deny
    reason: "Secrets stay put: ask the security team."
  - id: prod-needs-a-person
    when: tool.name == "deploy" && args.service == "prod"
    effect: approve
tools:
  deploy:
    name: ship
    description: Ship a service to its region.
    fixed: {dry_run: false}
    hidden: [token]
"""


@pytest.fixture
def workspace(deployed: Path) -> Path:
    root = deployed / "ws"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "key.txt").write_text("hunter2\n")
    (root / "notes.txt").write_text("public notes\n")
    return root


@pytest.fixture
def router(workspace: Path) -> Any:
    SEEN.clear()
    with ToolRouter(policy=Policy.from_text(POLICY), context=BuiltInToolContext(workspace)) as r:
        r.register(deploy)
        yield r


def names(router: ToolRouter, *, user: str | None = None, **request: Any) -> list[str]:
    return [d["function"]["name"] for d in router.get_all_tools(user_id=user, **request)]


ADMIN = Subject("alice", {"roles": ["admin"]})
DEV = Subject("bob", {"roles": ["dev"]})


def test_an_admin_sees_bash_and_a_developer_does_not(router: ToolRouter) -> None:
    with policy_subject(ADMIN):
        assert names(router, user="alice", function_list=["bash", "read_file"]) == ["bash", "read_file"]
    with policy_subject(DEV):
        assert names(router, user="bob", function_list=["bash", "read_file"]) == ["read_file"]
        with pytest.raises(ToolNotFoundError):
            router.invoke("bash", {"command": "echo ran"}, "bob")
    # No claims at all (a library caller): the rule errs on the missing key and, being a deny, holds.
    assert names(router, function_list=["bash"]) == []


def test_an_exposure_knows_which_rule_hides_each_tool(router: ToolRouter, workspace: Path) -> None:
    """What served mode's audit names when a call names a tool the policy hides."""
    router.register(purge_database)
    with policy_subject(DEV):
        exposure = router.expose(["bash", "read_file", "deploy", "purge_database"], user_id="bob")
    assert {n: v.rule for n, v in exposure.policy_hidden.items()} == {
        "bash": "bash-admins-only",
        "purge_database": "purge-admins-only",
    }
    with policy_subject(ADMIN):
        assert router.expose(["bash", "purge_database"], user_id="alice").policy_hidden == {}
    policy = Policy.from_dict(
        {"default": "deny", "rules": [{"id": "reads", "when": "tool.name == 'grep'", "effect": "allow"}]}
    )
    with ToolRouter(policy=policy, context=BuiltInToolContext(workspace)) as denying:
        exposure = denying.expose(["grep", "bash"])
        assert list(exposure.tools) == ["grep"] and exposure.policy_hidden["bash"].rule is None  # the default


def test_a_subject_set_for_another_user_is_not_borrowed(router: ToolRouter) -> None:
    with policy_subject(ADMIN):  # alice's claims must not reach bob's exposure
        assert names(router, user="bob", function_list=["bash"]) == []


def test_an_argument_rule_refuses_one_path_and_not_another(router: ToolRouter, workspace: Path) -> None:
    tools = ExposedTools(router, ["read_file", "write_file"])
    refused = tools.execute("read_file", {"path": "secrets/key.txt"})
    assert refused.kind is OutcomeKind.REFUSED
    assert refused.text == "Secrets stay put: ask the security team."
    assert "hunter2" not in refused.text
    assert "public notes" in tools.execute("read_file", {"path": "notes.txt"}).text
    # A refused write runs nothing: the file is not there afterwards.
    wrote = tools.execute("write_file", {"path": "secrets/new.txt", "content": "x"})
    assert wrote.kind is OutcomeKind.REFUSED
    assert not (workspace / "secrets" / "new.txt").exists()
    assert tools.execute("write_file", {"path": "open.txt", "content": "x"}).kind is OutcomeKind.OK
    assert (workspace / "open.txt").read_text() == "x"
    # invoke by name, arguments as JSON text (the one-pass path) too.
    with pytest.raises(PolicyDeniedError, match=r"^Secrets stay put: ask the security team\.$"):
        router.invoke("read_file", json.dumps({"path": "secrets/key.txt"}))
    assert "public notes" in router.invoke("read_file", json.dumps({"path": "notes.txt"}))


def test_approve_holds_the_call_until_a_person_approves(router: ToolRouter) -> None:
    tools = ExposedTools(router, ["deploy"])
    held = tools.execute("ship", {"service": "prod"})
    assert held.kind is OutcomeKind.APPROVAL_NEEDED
    assert SEEN == []
    assert tools.needs_approval("ship", {"service": "prod"}) and not tools.needs_approval("ship", {"service": "web"})
    assert tools.execute("ship", {"service": "prod"}, approved=True).text == "deployed prod to eu"
    with pytest.raises(ApprovalRequiredError):
        router.invoke("ship", {"service": "prod"})
    assert len(SEEN) == 1


def test_overrides_rename_redescribe_fix_and_hide(router: ToolRouter) -> None:
    [definition] = router.get_all_tools(["deploy"])
    fn = definition["function"]
    assert fn["name"] == "ship"
    assert fn["description"] == "Ship a service to its region."
    assert set(fn["parameters"]["properties"]) == {"service", "region"}
    tools = ExposedTools(router, ["deploy"])
    # The client tries to set the fixed argument and to slip in the hidden one.
    assert tools.execute("ship", {"service": "web", "dry_run": True, "token": "stolen"}).kind is OutcomeKind.OK
    assert SEEN == [{"service": "web", "region": "eu", "token": "", "dry_run": False}]
    # The old name is gone, even by name through invoke.
    assert tools.execute("deploy", {"service": "web"}).kind is OutcomeKind.NOT_FOUND
    with pytest.raises(ToolNotFoundError):
        router.invoke("deploy", {"service": "web"})
    assert router.invoke("ship", {"service": "api", "region": "us", "token": "t"}) == "deployed api to us"
    assert SEEN[-1] == {"service": "api", "region": "us", "token": "", "dry_run": False}


def test_a_hidden_tool_is_not_found_by_search_nor_callable_from_code(router: ToolRouter) -> None:
    router.register(purge_database)
    with policy_subject(DEV):
        exposure = router.expose(
            ["bash", "read_file", "grep", "deploy", "purge_database", "run_code"], user_id="bob", deferred=True
        )
        assert "bash" not in exposure and "purge_database" not in exposure
        search = exposure.get("search_tools")
        assert search is not None
        found = router.run(search, {"query": "purge the database, ship a service"}).trace["found"]
        assert "ship" in found and "purge_database" not in found
    with policy_subject(ADMIN):  # the same request of an admin: the search finds it
        exposure = router.expose(["deploy", "purge_database"], user_id="alice", deferred=True)
        found = router.run(exposure.get("search_tools"), {"query": "purge the database"}).trace["found"]  # type: ignore[arg-type]
        assert "purge_database" in found
    with policy_subject(DEV):
        exposure = router.expose(["bash", "read_file", "run_code"], user_id="bob")
        code = "import tools\ntry:\n    print(tools.call('bash', command='echo ran-it'))\n"
        code += "except Exception as e:\n    print('no:', e)"
        ran = router.run(exposure.get("run_code"), {"code": code})  # type: ignore[arg-type]
        assert "no:" in ran.text and "ran-it" not in ran.text.replace("echo ran-it", "")
        # The argument rule holds inside a program too.
        program = "from tools import read_file\ntry:\n    print(read_file(path='secrets/key.txt'))\n"
        program += "except Exception as e:\n    print('refused:', e)"
        secret = router.run(exposure.get("run_code"), {"code": program})  # type: ignore[arg-type]
        assert "hunter2" not in secret.text and "Secrets stay put" in secret.text


def test_default_deny_shows_only_what_a_rule_allows(workspace: Path) -> None:
    policy = Policy.from_dict(
        {"default": "deny", "rules": [{"id": "reads", "when": "tool.annotations.readOnlyHint", "effect": "allow"}]}
    )
    with ToolRouter(policy=policy, context=BuiltInToolContext(workspace)) as router:
        assert names(router, function_list=["read_file", "write_file", "grep"]) == ["read_file", "grep"]
        with pytest.raises(ToolNotFoundError):
            router.invoke("write_file", {"path": "a.txt", "content": "x"})
    assert not (workspace / "a.txt").exists()


def test_an_allow_rule_that_errs_on_a_call_does_not_open_the_door(workspace: Path) -> None:
    # `args.path` is missing on this call: the allow rule errs, so the default (deny) decides.
    policy = Policy.from_dict(
        {"default": "deny", "rules": [{"id": "ws", "when": 'args.path.startsWith("notes")', "effect": "allow"}]}
    )
    with ToolRouter(policy=policy, context=BuiltInToolContext(workspace)) as router:
        tools = ExposedTools(router, ["read_file", "grep"])
        assert tools.names == ["read_file", "grep"]  # the call decides: listed
        assert tools.execute("read_file", {"path": "notes.txt"}).kind is OutcomeKind.OK
        assert tools.execute("grep", {"pattern": "x"}).kind is OutcomeKind.REFUSED


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ('rules:\n  - id: a\n    when: "tool.name =="\n    effect: deny\n', "p.yaml:3:11", "not valid CEL"),
        ("default: allow\nrules:\n  - id: a\n    when: 'true'\n    effect: maybe\n", "p.yaml:5:13", "effect"),
        ('{"default": "allow",\n "rules": [}', "p.yaml:2:12", "not valid JSON"),
        ("rules:\n  - id: a\n    when: foo.x\n    effect: deny\n", "p.yaml:3:11", "unknown variable foo"),
        ("rules: [\n", "p.yaml:2:1", "not valid YAML"),
        ("tools:\n  x:\n    fixed: {a: 1}\n    hidden: [a]\n", "p.yaml:3:5", "both fixed and hidden"),
        ("default: allow\nsurprise: 1\n", "p.yaml:2:11", "surprise"),
    ],
)
def test_a_broken_file_is_refused_naming_line_and_column(text: str, where: str, what: str) -> None:
    with pytest.raises(PolicyFileError) as refused:
        Policy.from_text(text, "p.yaml")
    assert str(refused.value).startswith(where + ":")
    assert what in str(refused.value)


def test_load_reads_yaml_and_json_files(deployed: Path) -> None:
    (deployed / "p.json").write_text(json.dumps({"default": "deny", "rules": []}))
    (deployed / "p.yaml").write_text(POLICY)
    assert Policy.load(deployed / "p.json").spec.default == "deny"
    assert Policy.load(deployed / "p.yaml").rules[0].spec.id == "bash-admins-only"
    with pytest.raises(PolicyFileError, match="cannot read"):
        Policy.load(deployed / "missing.yaml")


@pytest.mark.parametrize(
    "when",
    [
        'tool.name == "write_file" && args.path.startsWith("secrets/")',
        'tool.name == "write_file" && args["path"].startsWith("secrets/")',  # any key: all of args
        'tool.name == "write_file" && args.exists(k, k == "path" && args[k].startsWith("secrets/"))',
    ],
)
def test_a_rule_sees_the_arguments_it_reads_however_it_reads_them(workspace: Path, when: str) -> None:
    policy = Policy.from_dict({"rules": [{"id": "w", "when": when, "effect": "deny", "reason": "no"}]})
    with ToolRouter(policy=policy, context=BuiltInToolContext(workspace)) as router:
        tools = ExposedTools(router, ["write_file"])
        big = "x" * 2_000_000  # a write's content is never what a path rule needs
        assert tools.execute("write_file", {"path": "secrets/a.txt", "content": big}).text == "no"
        assert tools.execute("write_file", {"path": "open/a.txt", "content": big}).kind is OutcomeKind.OK
        # A value CEL cannot hold makes every rule that reads it err: a deny rule then holds.
        assert tools.execute("write_file", {"path": "open/b.txt", "content": "x", "extra": 2**70}).kind in (
            OutcomeKind.REFUSED,
            OutcomeKind.BAD_ARGUMENTS,
        )
    assert not (workspace / "secrets" / "a.txt").exists() and (workspace / "open" / "a.txt").stat().st_size == len(big)


def test_a_rule_may_deny_code_mode_and_the_search_tool_themselves(workspace: Path) -> None:
    policy = Policy.from_dict(
        {"rules": [{"id": "no-code", "when": 'tool.name in ["run_code", "search_tools"]', "effect": "deny"}]}
    )
    with ToolRouter(policy=policy, context=BuiltInToolContext(workspace)) as router:
        router.register(deploy)
        exposure = router.expose(["read_file", "deploy", "run_code"], deferred=["deploy"])
        assert "run_code" not in exposure and "search_tools" not in exposure
        assert "read_file" in exposure and "deploy" in exposure
