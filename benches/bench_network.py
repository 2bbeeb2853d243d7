"""Issue 55: what a network of a command's own costs at start, interleaved with no network.

A tenant's command (bubblewrap, the minimal view, a uid of its own, as served mode runs it),
`exec 'echo ok'`, three ways each round: no network (bwrap's own empty namespace, the default),
`sandbox_network="internet"` (pasta + the routing rules + a nested user namespace), and an
allowlist (the same namespace, the proxy's ports forwarded in). Results must be equal (`ok`).
The ratio printed is the networked start over the start without network (above 1: what the
namespace costs).

    python -m pytest benches/bench_network.py --benchmark-disable -s
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _interleave import compare

from toolroute import BuiltInToolContext, ToolRouter
from toolroute.builtins._process import netns
from toolroute.builtins._process.sandbox import SandboxUnavailable, bwrap_path

UID = 0x70000000 + 4243
COMMAND = {"command": "echo ok"}


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "a tenant's uid needs root"
    try:
        bwrap_path()
        netns.probe(UID)
    except (SandboxUnavailable, netns.NetworkUnavailable) as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="toolroute-bench-network-", dir="/var/tmp"))
    base.chmod(0o755)
    (base / "ws").mkdir(mode=0o700)
    os.chown(base / "ws", UID, UID)
    yield base / "ws"
    shutil.rmtree(base, ignore_errors=True)


def test_network_namespace_start_against_none(workspace: Path) -> None:
    if why := _unavailable():
        pytest.skip(why)
    routers = {
        network: ToolRouter(
            context=BuiltInToolContext(
                workspace,
                sandbox="bubblewrap",
                sandbox_view="minimal",
                sandbox_uid=UID,
                sandbox_network=network,
                user_id="bench",
            )
        )
        for network in ("none", "internet", ("pypi.org",))
    }

    def run(network: object) -> str:
        return str(json.loads(routers[network].invoke("bash", COMMAND))["stdout"])  # type: ignore[index]

    try:
        compare(
            "tenant command start: network namespace (pasta) against none",
            ("no network", lambda: run("none")),
            {"internet": lambda: run("internet"), "allowlist": lambda: run(("pypi.org",))},
            rounds=30,
        )
    finally:
        for router in routers.values():
            router.close()
