"""Network for sandboxed commands (issue 55): a namespace of each command's own reaching the
internet only, or an allowlist through the egress proxy; never the host's loopback, private
ranges, link-local or metadata addresses, nor the host's own addresses.

The internet is stood in for by a network namespace the test makes (`_stand_in_internet.py`),
with a private (10.x) and the metadata address routed into it too: a command that was not
confined would reach the test's namespace (its server logs every connection), never another
machine. Commands run as a uid of their own (pasta cannot map a namespace as root), under
bubblewrap, as served tenants do.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _bash_helpers import bash_router, call, unavailable, wait_until
from _serve_helpers import outside_tmp, run_cli, tool_env
from _stand_in_internet import StandIn, stand_in_internet

from toolroute.builtins._process import netns
from toolroute.builtins._process.egress import EGRESS, Refusal, matches
from toolroute.builtins._process.sandbox import bwrap_path
from toolroute.context import BuiltInToolContext, network_policy
from toolroute.errors import ToolExecutionError
from toolroute.router import ToolRouter

UID = 1879048150  # the commands' own (below served mode's default tenant range)
NAMES = {"pkgs.stand-in.test": "internet", "other.stand-in.test": "internet", "x.rebind.stand-in.test": "private"}
ALLOW = ("pkgs.stand-in.test", "*.rebind.stand-in.test")


def _network_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the stand-in internet and a command uid of its own need root"
    if why := unavailable(bwrap_path):
        return why
    try:
        netns.probe(UID)
    except netns.NetworkUnavailable as exc:
        return str(exc)
    return None


pytestmark = pytest.mark.skipif(bool(_network_unavailable()), reason=str(_network_unavailable()))


@pytest.fixture(scope="module")
def internet() -> Iterator[StandIn]:
    with stand_in_internet(NAMES) as stand_in:
        yield stand_in


@pytest.fixture
def owned() -> Iterator[Path]:
    """A workspace outside /tmp owned by the commands' uid."""
    base = outside_tmp()
    workspace = base / "ws"
    workspace.mkdir(mode=0o700)
    os.chown(workspace, UID, UID)
    yield workspace
    shutil.rmtree(base, ignore_errors=True)


class Listener:
    """A TCP listener of the host's that counts the connections it accepts."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def host_listeners() -> Iterator[tuple[Listener, Listener]]:
    """One on the host's loopback (a database trusting local TCP, the server's own port), one on
    every address (reached through the host's own addresses)."""
    loopback, everywhere = Listener("127.0.0.1"), Listener("0.0.0.0")
    yield loopback, everywhere
    loopback.close()
    everywhere.close()


# What each probe says: "HOST:PORT reached <last line of the reply>" or "HOST:PORT refused <why>".
PROBE = """for target in {targets}; do
  if out=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/${{0%:*}}/${{0#*:}}" &&
      printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3' "$target" 2>&1)
  then echo "$target reached $(printf '%s' "$out" | tail -1)"
  else echo "$target refused $(printf '%s' "$out" | tail -1)"
  fi
done"""


def probe(router: ToolRouter, targets: list[str]) -> dict[str, str]:
    out = call(router, command=PROBE.format(targets=" ".join(targets)), timeout=120)
    lines = out["stdout"].splitlines()
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in lines}


def networked(workspace: Path, network: Any, **extra: Any) -> Any:
    return bash_router(
        workspace, sandbox="bubblewrap", sandbox_view="minimal", sandbox_uid=UID, sandbox_network=network, **extra
    )


def host_address(stand_in: StandIn) -> str:
    """The host's own end of the stand-in's veth: an address of this host that is not private."""
    last = int(stand_in.internet.rsplit(".", 1)[1])
    return f"{stand_in.internet.rsplit('.', 1)[0]}.{last - 1}"


# ---- internet ------------------------------------------------------------------------------


def test_internet_reaches_the_internet_and_nothing_of_the_host_or_private_networks(
    owned: Path, internet: StandIn, host_listeners: tuple[Listener, Listener]
) -> None:
    loopback, everywhere = host_listeners
    targets = [
        f"{internet.internet}:80",
        f"127.0.0.1:{loopback.port}",
        f"{host_address(internet)}:{everywhere.port}",
        f"{internet.private}:80",
        f"{internet.metadata}:80",
    ]
    with networked(owned, "internet") as router:
        seen = probe(router, targets)
        rules = call(router, command="ip rule del prio 20; echo rc=$?; ip rule | grep -c prohibit")
    assert seen[targets[0]] == f"reached hello from {internet.internet}", seen
    for target in targets[1:]:
        assert seen[target].startswith("refused"), (target, seen)
    # Private and metadata destinations are prohibited in the namespace (EACCES), never sent.
    assert "Permission denied" in seen[targets[3]] and "Permission denied" in seen[targets[4]], seen
    assert loopback.accepted == 0 and everywhere.accepted == 0
    assert internet.private not in internet.reached() and internet.metadata not in internet.reached()
    # The command cannot undo the rules: no capability over its namespace.
    assert "Operation not permitted" in rules["stderr"] and "rc=2" in rules["stdout"], rules
    assert int(rules["stdout"].split()[-1]) >= 10, rules
    assert rules["sandbox"]["network"] == "internet"


def test_internet_resolves_names_through_the_namespace_s_resolver(owned: Path, internet: StandIn) -> None:
    """DNS goes to the context's resolver (`sandbox_dns`, here the stand-in's) through the NAT; by
    default to a fixed address in a prohibited range that pasta maps to the host's resolver
    (private or loopback as it may be), which tests do not ask: it is not on this machine."""
    with networked(owned, "internet", sandbox_dns=internet.internet) as router:
        out = call(
            router, command="cat /etc/resolv.conf; getent hosts pkgs.stand-in.test; getent hosts nope.test; echo rc=$?"
        )
        seen = probe(router, ["pkgs.stand-in.test:80"])
    assert f"nameserver {internet.internet}" in out["stdout"]
    assert f"{internet.internet}  " in out["stdout"] or f"{internet.internet} " in out["stdout"], out
    assert "rc=2" in out["stdout"], out  # an unknown name is unknown
    assert seen["pkgs.stand-in.test:80"] == f"reached hello from {internet.internet}", seen


def test_what_a_command_listens_on_is_not_exposed_on_the_host(owned: Path) -> None:
    port = _free_port()
    with networked(owned, "internet") as router:
        started = call(router, action="start", command=f"exec python3 -u -m http.server {port} --bind 0.0.0.0")

        def listening() -> bool:
            logs = call(router, action="logs", process_id=started["processId"], offset=0)
            return "Serving HTTP" in logs["stdout"]["content"]

        wait_until(listening, "the command's server to listen")
        inside = call(router, command=f"echo > /dev/tcp/127.0.0.1/{port} && echo own-reached")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=3).close()
        call(router, action="stop", process_id=started["processId"])
    # Each command has a namespace of its own: another command does not reach this one's server.
    assert "own-reached" not in inside["stdout"], inside


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- an allowlist --------------------------------------------------------------------------


@pytest.fixture
def refusals() -> Iterator[list[Refusal]]:
    seen: list[Refusal] = []
    stop = EGRESS.listen(seen.append)
    yield seen
    stop()


def test_an_allowlist_reaches_allowed_names_through_the_proxy_and_refuses_the_rest(
    owned: Path, internet: StandIn, refusals: list[Refusal], host_listeners: tuple[Listener, Listener]
) -> None:
    loopback, _ = host_listeners
    command = "\n".join(
        [
            "curl -sS -m 20 http://pkgs.stand-in.test/",
            'curl -sS -m 20 --proxy "$ALL_PROXY" http://pkgs.stand-in.test/',
            "curl -sS -m 20 http://other.stand-in.test/; echo",
            "curl -sS -m 20 http://x.rebind.stand-in.test/; echo",
            f"curl -sS -m 20 http://127.0.0.1:{loopback.port}/; echo loopback-rc=$?",
            "curl -sS -m 20 https://other.stand-in.test/ -o /dev/null; echo connect-rc=$?",
            "getent hosts pkgs.stand-in.test; getent hosts other.stand-in.test; echo dns-rc=$?",
            f"timeout 5 bash -c 'echo > /dev/tcp/{internet.internet}/80' 2>&1; echo direct-rc=$?",
        ]
    )
    with networked(owned, ALLOW, sandbox_dns=internet.internet, user_id="alice") as router:
        out = call(router, command=command, timeout=180)
    text = out["stdout"]
    assert text.count(f"hello from {internet.internet}") == 2, out  # HTTP proxy and SOCKS5
    assert (
        "toolroute: connection to other.stand-in.test:80 refused: other.stand-in.test is not in the network "
        "allowlist (pkgs.stand-in.test, *.rebind.stand-in.test)"
    ) in text, out
    assert "x.rebind.stand-in.test (allowed by *.rebind.stand-in.test) resolves to no public address" in text, out
    assert "connect-rc=56" in text, out  # CONNECT answered 403
    assert f"{internet.internet}" in text.split("dns-rc")[0] and "dns-rc=2" in text, out  # NXDOMAIN for the rest
    assert "direct-rc=1" in text and "Permission denied" in text, out  # only the proxy is a way out
    assert "loopback-rc=0" not in text and loopback.accepted == 0, out  # localhost is the namespace's own
    assert internet.private not in internet.reached()
    assert out["sandbox"]["network"] == "allowlist" and out["sandbox"]["networkAllow"] == list(ALLOW)
    refused = {(r.owner, r.host, r.port, r.via) for r in refusals}
    assert ("alice", "other.stand-in.test", 80, "http") in refused
    assert ("alice", "other.stand-in.test", 443, "connect") in refused
    assert ("alice", "x.rebind.stand-in.test", 80, "http") in refused


def test_the_proxy_wants_the_command_s_credentials(owned: Path, internet: StandIn) -> None:
    """Another process of the host (or a command that dropped them) is not let through."""
    with networked(owned, ALLOW, sandbox_dns=internet.internet) as router:
        out = call(
            router,
            command="curl -sS -m 20 --proxy http://127.0.0.1:3128 http://pkgs.stand-in.test/ -o /dev/null "
            "-w '%{http_code}'; curl -sS -m 20 --proxy socks5h://127.0.0.1:3128 http://pkgs.stand-in.test/; "
            "echo socks-rc=$?",
        )
    assert out["stdout"].startswith("407"), out
    assert "socks-rc=0" not in out["stdout"], out


def test_allowlist_patterns() -> None:
    assert matches("pkgs.stand-in.test", ALLOW) == "pkgs.stand-in.test"
    assert matches("PKGS.stand-in.test.", ALLOW) == "pkgs.stand-in.test"
    assert matches("a.b.rebind.stand-in.test", ALLOW) == "*.rebind.stand-in.test"
    assert matches("rebind.stand-in.test", ALLOW) is None  # a wildcard is beneath its domain only
    assert matches("evilrebind.stand-in.test", ALLOW) is None
    assert matches("pkgs.stand-in.test.evil.example", ALLOW) is None
    for bad in ([], ["*"], ["*.*.x"], ["a b"], ["http://pypi.org"], ["pypi.org/simple"]):
        with pytest.raises(ValueError):
            network_policy(bad)


# ---- what True means, and what happens without pasta --------------------------------------


def test_true_means_the_internet_never_the_host_s_namespace(
    owned: Path, host_listeners: tuple[Listener, Listener]
) -> None:
    loopback, _ = host_listeners
    assert BuiltInToolContext(owned, sandbox_network=True).sandbox_network == "internet"
    with networked(owned, True) as router:
        seen = probe(router, [f"127.0.0.1:{loopback.port}"])
    assert seen[f"127.0.0.1:{loopback.port}"].startswith("refused") and loopback.accepted == 0


def test_without_pasta_a_networked_command_is_refused_with_the_reason(owned: Path, tmp_path: Path) -> None:
    """PATH without pasta: refused, never run on the host's network (nor without one)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bwrap", "bash", "sh", "ip", "true"):
        found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
        assert found is not None
        (tools / name).symlink_to(found)
    proc = run_cli(
        "call",
        "bash",
        '{"command": "touch ran"}',
        *("--workspace", str(owned), "--sandbox", "bubblewrap", "--network"),
        env=tool_env(PATH=str(tools)),
    )
    assert proc.returncode != 0, proc.stdout
    assert "pasta is not installed (Debian/Ubuntu package: passt)" in proc.stderr + proc.stdout, proc
    assert not (owned / "ran").exists()


def test_a_sandbox_that_cannot_confine_the_network_refuses_it(owned: Path) -> None:
    if unavailable(lambda: __import__("toolroute.builtins._process.sandbox").builtins._process.sandbox.landlock_abi()):
        pytest.skip("no Landlock here")
    with (
        bash_router(owned, sandbox="landlock", sandbox_uid=UID, sandbox_network="internet") as router,
        pytest.raises(ToolExecutionError, match="needs bubblewrap"),
    ):
        router.execute("bash", {"command": "touch ran"})
    assert not (owned / "ran").exists()


# ---- run_code --------------------------------------------------------------------------------


def test_a_code_program_gets_the_same_network(owned: Path, internet: StandIn) -> None:
    program = f"""
import socket
for host in ({internet.internet!r}, {internet.private!r}, {internet.metadata!r}):
    try:
        with socket.create_connection((host, 80), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            print(host, "reached", s.recv(200).decode().splitlines()[-1])
    except OSError as e:
        print(host, "refused", type(e).__name__)
"""
    context = BuiltInToolContext(
        owned, sandbox="bubblewrap", sandbox_view="minimal", sandbox_uid=UID, sandbox_network="internet"
    )
    with ToolRouter(context=context) as router:
        output = router.run(router.expose(["run_code"]).get("run_code"), {"code": program})  # type: ignore[arg-type]
    lines = output.text.splitlines()
    assert f"{internet.internet} reached hello from {internet.internet}" in lines, output.text
    assert f"{internet.private} refused PermissionError" in lines, output.text
    assert f"{internet.metadata} refused PermissionError" in lines, output.text
    assert internet.private not in internet.reached()


def test_every_namespace_is_gone_with_its_command(owned: Path) -> None:
    """pasta ends with its command: nothing of a networked command is left behind."""
    with networked(owned, "internet") as router:
        for _ in range(3):
            call(router, command="true")
    wait_until(lambda: not _pastas_of(UID), "the commands' pasta processes to end")


def _pastas_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and b"pasta" in (entry / "cmdline").read_bytes().split(b"\0")[0]:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
