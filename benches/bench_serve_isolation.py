"""Issue 24: what tenant isolation costs, interleaved with what it replaces.

- A command's start under the minimal view (only system folders bound, or Landlock read rules)
  against today's host view (`--ro-bind / /`, or write rules only), same mechanism, same command,
  same output checked; and, when root, with the tenant's own uid.
- The audit line per call: a served call through `TenantDoors` with and without `--audit-log`
  (one JSON line, appended and fsynced), the same result checked.

Ratios are alternative / toolroute's new path: above 1 means the new path is faster.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _interleave import compare

from toolroute import BuiltInToolContext, ToolRouter, function_tool
from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind
from toolroute.serve.audit import AuditLog
from toolroute.serve.tenant_doors import TenantDoors
from toolroute.serve.tenants import Tenancy

COMMAND = {"command": "cat /etc/hostname >/dev/null; echo ok"}


def _available(mechanism: str) -> bool:
    try:
        resolve_kind(mechanism)  # type: ignore[arg-type]  # raises where that mechanism cannot run
    except SandboxUnavailable:
        return False
    return True


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="toolroute-bench-isolation-", dir="/var/tmp"))
    base.chmod(0o755)
    (base / "ws").mkdir(mode=0o755)
    yield base / "ws"
    shutil.rmtree(base, ignore_errors=True)


def _stdout(router: ToolRouter) -> str:
    return str(json.loads(router.invoke("bash", COMMAND))["stdout"])


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_minimal_view_start_against_the_host_view(workspace: Path, mechanism: str) -> None:
    if not _available(mechanism):
        pytest.skip(f"{mechanism} is not available here")
    routers = {
        view: ToolRouter(context=BuiltInToolContext(workspace, sandbox=mechanism, sandbox_view=view))  # type: ignore[arg-type]
        for view in ("host", "minimal")
    }
    alternatives: dict[str, Any] = {"host view (today)": lambda: _stdout(routers["host"])}
    if os.geteuid() == 0:
        uid = 0x70000000 + 4242
        os.chown(workspace, uid, uid)
        tenant = BuiltInToolContext(workspace, sandbox=mechanism, sandbox_view="minimal", sandbox_uid=uid)  # type: ignore[arg-type]
        routers["tenant"] = ToolRouter(context=tenant)
        alternatives["minimal view + tenant uid"] = lambda: _stdout(routers["tenant"])
    try:
        compare(
            f"bash exec start under {mechanism}",
            ("minimal view", lambda: _stdout(routers["minimal"])),
            alternatives,
            rounds=40,
        )
    finally:
        for router in routers.values():
            router.close()
        os.chown(workspace, os.geteuid(), os.getegid())


@function_tool(name="bench_echo", description="echo", quick=True)
def bench_echo(text: str) -> str:
    return text


def test_audit_cost_per_call(workspace: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(workspace))
    router.register(bench_echo)
    tenancy = Tenancy(router, ["bench_echo"], [])
    audit = AuditLog(workspace.parent / "audit.jsonl")
    doors = {
        "audited": TenantDoors(tenancy, audit=audit, authenticated=False),
        "plain": TenantDoors(tenancy, authenticated=False),
    }

    def call(name: str) -> str:
        async def go() -> str:
            result = await doors[name].call_tool(None, "bench_echo", {"text": "hello"})  # type: ignore[arg-type]
            assert not result.is_error, result
            return str(result.content[0].text)

        return anyio.run(go)

    try:
        compare(
            "served call, audit line (fsynced) vs none",
            ("audited", lambda: call("audited")),
            {"no audit": lambda: call("plain")},
            rounds=200,
        )
    finally:
        audit.close()
        router.close()
    lines = (workspace.parent / "audit.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["outcome"] == "ok" for line in lines)
