"""The minimal view of a sandboxed command, for library users: only the system folders, the
workspace, its private /tmp and the declared roots; under bubblewrap and under Landlock, with the
workspace outside /tmp (a sandbox replaces /tmp, which would hide a leak)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.builtins._process.sandbox import SandboxUnavailable, landlock_abi, readable_grants, resolve_kind

SECRET = "neighbour-secret-51c0"


def _skip_unless(mechanism: str) -> None:
    try:
        resolve_kind(mechanism)  # type: ignore[arg-type]  # raises where that mechanism cannot run
    except SandboxUnavailable as exc:
        pytest.skip(f"{mechanism}: {exc}")


@pytest.fixture(params=["bubblewrap", "landlock"])
def mechanism(request: pytest.FixtureRequest) -> str:
    _skip_unless(request.param)
    return str(request.param)


@pytest.fixture
def layout(deployed: Path) -> dict[str, Path]:
    folders = {name: deployed / name for name in ("ws", "neighbour", "shared", "hidden")}
    for folder in folders.values():
        folder.mkdir()
    (folders["neighbour"] / "notes.txt").write_text(SECRET + "\n")
    (folders["shared"] / "doc.txt").write_text("shared doc\n")
    (folders["hidden"] / "key.txt").write_text(SECRET + "\n")
    return folders


def _router(mechanism: str, layout: dict[str, Path], view: str = "minimal") -> ToolRouter:
    ctx = BuiltInToolContext(
        layout["ws"],
        read_only_roots=[layout["shared"]],
        sandbox=mechanism,  # type: ignore[arg-type]
        sandbox_view=view,  # type: ignore[arg-type]
        sandbox_hidden=[layout["hidden"]],
    )
    return ToolRouter(context=ctx)


@pytest.fixture
def minimal(mechanism: str, layout: dict[str, Path]) -> Iterator[ToolRouter]:
    with _router(mechanism, layout) as router:
        yield router


def run(router: ToolRouter, command: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(router.invoke("bash", {"command": command}))
    return out


def test_a_command_works_in_its_workspace_with_the_system_tools(minimal: ToolRouter, layout: dict[str, Path]) -> None:
    out = run(minimal, "printf 'b\\na\\n' > f.txt && sort f.txt | tr a-z A-Z && echo $HOME && ls /usr/bin | grep -c .")
    lines = out["stdout"].splitlines()
    assert out["exitCode"] == 0 and lines[:2] == ["A", "B"], out
    assert lines[2] == str(layout["ws"].resolve()) and int(lines[3]) > 10
    assert out["sandbox"]["view"] == "minimal"
    assert run(minimal, "echo t > /tmp/x && cat /tmp/x || (echo t > $TMPDIR/x && cat $TMPDIR/x)")["stdout"] == "t\n"


def test_neighbours_home_hidden_paths_and_shadow_are_unreadable(minimal: ToolRouter, layout: dict[str, Path]) -> None:
    for target in (layout["neighbour"] / "notes.txt", layout["neighbour"], layout["hidden"] / "key.txt", "/etc/shadow"):
        out = run(minimal, f"cat {target}; ls -1a {target}/; true")
        assert SECRET not in out["stdout"] and out["stdout"] == "", (target, out)
    # Relative, through /proc and through a symlink the command makes itself.
    for path in ("../neighbour/notes.txt", f"/proc/self/root{layout['neighbour']}/notes.txt", "link/notes.txt"):
        out = run(minimal, f"ln -sfn {layout['neighbour']} link; cat {path}; true")
        assert SECRET not in out["stdout"], (path, out)


def test_declared_read_only_roots_are_readable_not_writable(minimal: ToolRouter, layout: dict[str, Path]) -> None:
    out = run(minimal, f"cat {layout['shared']}/doc.txt; echo x > {layout['shared']}/new.txt; echo rc=$?")
    assert out["stdout"] == "shared doc\nrc=1\n", out
    assert not (layout["shared"] / "new.txt").exists()


def test_the_hosts_environment_and_processes_are_out_of_reach(
    minimal: ToolRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/root/secret-config")
    host = subprocess.Popen(["sleep", "60"])
    try:
        out = run(minimal, f"cat /proc/{os.getpid()}/environ; echo; kill -0 {host.pid}; echo kill=$?; env")
    finally:
        host.kill()
        host.wait()
    if out["sandbox"]["confinement"] == "bubblewrap" or landlock_abi() >= 6:  # Landlock scopes signals from ABI 6
        assert "kill=1" in out["stdout"], out  # neither signalled nor even seen
    assert "secret-config" not in out["stdout"] and "XDG_CONFIG_HOME" not in out["stdout"]
    path = next(line for line in out["stdout"].splitlines() if line.startswith("PATH="))
    assert all(Path(p).is_relative_to("/usr") or p in ("/bin", "/sbin") for p in path[5:].split(":")), path


def test_the_host_view_is_one_setting_named_in_the_trace(mechanism: str, layout: dict[str, Path]) -> None:
    # The library default for one user's machine: the host read-only, neighbours included.
    with _router(mechanism, layout, view="host") as router:
        out = run(router, f"cat {layout['neighbour']}/notes.txt")
    assert out["stdout"] == SECRET + "\n" and out["sandbox"]["view"] == "host"


def test_landlock_grants_leave_out_exactly_the_hidden_paths(tmp_path: Path) -> None:
    for name in ("etc/ssl/private/k.pem", "etc/ssl/certs/ca.pem", "etc/hosts", "etc/shadow"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    hidden = [tmp_path / "etc/shadow", tmp_path / "etc/ssl/private"]
    grants, listable = readable_grants([tmp_path / "etc"], hidden)
    assert sorted(grants) == [tmp_path / "etc/hosts", tmp_path / "etc/ssl/certs"]
    assert listable == [tmp_path / "etc", tmp_path / "etc/ssl"]
    # Nothing granted lies beneath or above a hidden path's contents.
    for grant in grants:
        assert not any(grant == h or grant.is_relative_to(h) or h.is_relative_to(grant) for h in hidden)
