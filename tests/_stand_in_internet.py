"""A stand-in internet on this machine: a network namespace the test makes itself, reached from
the host through a veth pair (`ip netns add` + veth, Debian package iproute2).

Its address (`internet`, in 198.51.100.0/24, a documentation range that is not blocked) is what
a networked command may reach. A private address (`private`, 10.x) and the cloud metadata address
169.254.169.254 are routed from the host into the same namespace, so that a command that is
*not* confined reaches the test's own namespace (whose server logs it), never another machine.
The namespace also answers DNS (`names`). Everything is removed afterwards (deleting the host's
end of the veth removes its routes); one stand-in at a time per machine (a lock file), as the
metadata route is the host's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("_stand_in_server.py")
METADATA = "169.254.169.254"
LOCK = Path("/run/lock/toolroute-test-stand-in-internet.lock")


@dataclass(frozen=True)
class StandIn:
    internet: str  # the address a command may reach (port 80: HTTP, port 53: DNS)
    private: str  # a 10.x address routed into the namespace: must stay unreachable
    metadata: str  # 169.254.169.254, likewise
    log: Path  # one line per connection the namespace's HTTP server accepted: its destination

    def reached(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the stand-in internet needs root (ip netns add, veth)"
    if shutil.which("ip") is None:
        return "no `ip` (Debian package iproute2)"
    return None


@contextlib.contextmanager
def stand_in_internet(names: dict[str, str] | None = None) -> Iterator[StandIn]:
    """Yield the stand-in; `names` maps DNS names to addresses ("internet"/"private" are
    replaced by the stand-in's own addresses)."""
    if why := _unavailable():
        pytest.skip(why)
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _made(names or {})


def _made(names: dict[str, str]) -> Iterator[StandIn]:
    tag = f"{os.getpid() % 10000}{random.randrange(1000)}"
    namespace, host_end, ns_end = f"trnet{tag}", f"trh{tag}", f"trn{tag}"
    block = random.randrange(1, 63) * 4
    host_addr, internet = f"198.51.100.{block + 1}", f"198.51.100.{block + 2}"
    private = f"10.213.{random.randrange(256)}.9"
    log = Path(f"/run/lock/{namespace}.log")
    server = None
    try:
        _ip("netns", "add", namespace)
        _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
        _ip("link", "set", ns_end, "netns", namespace)
        _ip("addr", "add", f"{host_addr}/30", "dev", host_end)
        _ip("link", "set", host_end, "up")
        for address in (f"{internet}/30", f"{private}/32", f"{METADATA}/32"):
            _ip("-n", namespace, "addr", "add", address, "dev", ns_end)
        _ip("-n", namespace, "link", "set", ns_end, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "route", "add", "default", "via", host_addr)
        for address in (private, METADATA):  # leaks land in the test's namespace, not outside
            _ip("route", "add", f"{address}/32", "via", internet, "dev", host_end)
        resolved = {n: {"internet": internet, "private": private}.get(a, a) for n, a in names.items()}
        argv = ["ip", "netns", "exec", namespace, sys.executable, str(SERVER), str(log)]
        argv += [f"{name}={address}" for name, address in resolved.items()]
        server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert server.stdout is not None
        ready = server.stdout.readline()
        assert ready.strip() == "ready", server.stderr.read() if server.stderr else ready
        yield StandIn(internet, private, METADATA, log)
    finally:
        if server is not None:
            server.kill()
            server.wait(timeout=30)
        subprocess.run(["ip", "link", "del", host_end], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        log.unlink(missing_ok=True)
