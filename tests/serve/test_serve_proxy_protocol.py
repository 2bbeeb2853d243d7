"""The PROXY protocol behind HAProxy (issue 55): admission's per-source share counts each client
under the address the balancer's PROXY header names, not the balancer's own. A real HAProxy
(`mode tcp`, `send-proxy-v2`) in front of a real `toolroute serve --proxy-protocol 127.0.0.1`;
the clients come from 127.0.0.2 and 127.0.0.3 (every 127/8 address is this machine's). The header
parser is checked on its own too, with what a client forging one would send. Nothing is timed:
every wait is a bound.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from _mcp_helpers import free_port, wait_until
from _serve_helpers import served_http, stop_process, tool_env
from test_serve_admission import PARTIAL_HEAD, _address, _call_on_new_connection, _keyed_server_args, keyed

from toolroute.serve.proxy_protocol import V2_SIGNATURE, ProxyHeaderError, looks_like_header, networks, parse, trusted

__all__ = ["keyed"]  # the fixture, shared with the admission tests

HAPROXY_CONFIG = """\
global
    maxconn 1024
defaults
    mode tcp
    timeout connect 2s
    timeout client 120s
    timeout server 120s
frontend front
    bind 127.0.0.1:{port}
    default_backend toolroute
backend toolroute
    server r1 {backend}{send}
"""
FLOOD, TENANT = "127.0.0.2", "127.0.0.3"
PER_SOURCE = 8


# ---- the header ------------------------------------------------------------------------------


def _v2(source: bytes, port: int) -> bytes:
    body = source + bytes([127, 0, 0, 1]) + port.to_bytes(2, "big") + (8000).to_bytes(2, "big")
    return V2_SIGNATURE + bytes([0x21, 0x11]) + len(body).to_bytes(2, "big") + body


def test_v1_and_v2_headers_name_the_client() -> None:
    assert parse(b"PROXY TCP4 192.0.2.7 127.0.0.1 5555 8000\r\nGET /") == (("192.0.2.7", 5555), 42)
    assert parse(b"PROXY TCP6 2001:db8::1 ::1 5555 8000\r\n") == (("2001:db8::1", 5555), 38)
    assert parse(b"PROXY UNKNOWN\r\n") == (None, 15)
    assert parse(_v2(bytes([198, 51, 100, 9]), 4242) + b"POST") == (("198.51.100.9", 4242), 28)
    local = V2_SIGNATURE + bytes([0x20, 0x00]) + (0).to_bytes(2, "big")
    assert parse(local + b"GET") == (None, 16)  # LOCAL: the balancer's own (a health check)
    # Incomplete: more is read before deciding.
    assert parse(b"PRO") is None
    assert parse(b"PROXY TCP4 192.0.2.7") is None
    assert parse(_v2(bytes([198, 51, 100, 9]), 4242)[:20]) is None


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\n",  # a balancer's connection without a header
        b"PROXY TCP4 not-an-address 127.0.0.1 1 2\r\n",
        b"PROXY TCP4 2001:db8::1 127.0.0.1 1 2\r\n",  # the family and the address disagree
        b"PROXY TCP4 " + b"9" * 120,  # past 107 bytes without its end
        V2_SIGNATURE + bytes([0x21, 0x11]) + (60000).to_bytes(2, "big"),  # a header of 60 KB
        V2_SIGNATURE + bytes([0x13, 0x11]) + (12).to_bytes(2, "big") + bytes(12),  # version 1 in v2
    ],
)
def test_malformed_headers_are_refused(data: bytes) -> None:
    with pytest.raises(ProxyHeaderError):
        parse(data)


def test_only_the_configured_balancers_are_trusted() -> None:
    balancers = networks(["127.0.0.1", "10.1.0.0/16"])
    assert trusted(("127.0.0.1", 4000), balancers) and trusted(("10.1.2.3", 1), balancers)
    assert trusted(("::ffff:127.0.0.1", 4000, 0, 0), balancers)
    assert not trusted(("127.0.0.2", 4000), balancers) and not trusted(("10.2.0.1", 1), balancers)
    assert not trusted(("127.0.0.1", 1), ())
    assert looks_like_header(b"PROXY TCP4 ") and looks_like_header(_v2(bytes(4), 1))
    assert not looks_like_header(b"POST /mcp HTTP/1.1\r\n")
    with pytest.raises(ValueError, match="not an IP address"):
        networks(["balancer.example"])


# ---- behind HAProxy --------------------------------------------------------------------------


@contextmanager
def haproxy(backend: str, *, proxy_protocol: bool = True) -> Iterator[tuple[str, int]]:
    exe = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(exe).is_file():
        pytest.skip("HAProxy (Debian package haproxy) is not installed")
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="toolroute-haproxy-"))
    config = folder / "haproxy.cfg"
    config.write_text(
        HAPROXY_CONFIG.format(port=port, backend=backend, send=" send-proxy-v2" if proxy_protocol else "")
    )
    proc = subprocess.Popen([exe, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def listening() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
            return proc.poll() is not None

        assert wait_until(listening, timeout=30) and proc.poll() is None, "haproxy did not start"
        yield "127.0.0.1", port
    finally:
        stop_process(proc)
        shutil.rmtree(folder, ignore_errors=True)


def _partial(front: tuple[str, int], source: str, count: int) -> list[socket.socket]:
    """`count` connections from `source`, each a partial request head and then nothing."""
    peers = []
    for _ in range(count):
        peer = socket.create_connection(front, timeout=5, source_address=(source, 0))
        peer.sendall(PARTIAL_HEAD)
        peer.setblocking(False)
        peers.append(peer)
    return peers


def _closed(peer: socket.socket) -> bool:
    try:
        return peer.recv(4096) == b""  # the server closed it (HAProxy passes the close on)
    except BlockingIOError:
        return False
    except OSError:
        return True


@pytest.mark.parametrize("proxied", [True, False], ids=["proxy-protocol", "without"])
def test_two_clients_behind_haproxy_get_separate_shares(keyed: tuple[Path, str], proxied: bool) -> None:
    """Six stalled connections of one client, then forty of another, all through one HAProxy:
    the second is cut to its own share, the first keeps all six (it is within its share), and a
    keyed tenant's calls through the balancer are answered. Without the PROXY protocol, all count
    under the balancer's one address, and the six, the oldest, are among the first cut."""
    base, key = keyed
    args = _keyed_server_args(
        base,
        *("--request-head-timeout", "120", "--max-unauthenticated-per-source", str(PER_SOURCE)),
        *(("--proxy-protocol", "127.0.0.1") if proxied else ()),
    )
    with served_http(args, tool_env()) as served:
        host, port = _address(served.url)
        with haproxy(f"{host}:{port}", proxy_protocol=proxied) as front:
            held: list[socket.socket] = []
            try:
                held += (tenant := _partial(front, TENANT, 6))
                time.sleep(3)  # the tenant's connections are the older: stalled, first in line
                held += (flood := _partial(front, FLOOD, 40))
                assert wait_until(lambda: sum(map(_closed, flood)) >= 40 - PER_SOURCE, timeout=60)
                cut = [_closed(peer) for peer in tenant]
                assert not any(cut) if proxied else all(cut)
                url = f"http://{front[0]}:{front[1]}/mcp"
                answers = [anyio.run(_call_on_new_connection, url, key, f"call {n}") for n in range(3)]
                assert answers == ["call 0", "call 1", "call 2"]
            finally:
                for peer in held:
                    peer.close()


def test_a_header_from_anyone_else_is_refused(keyed: tuple[Path, str]) -> None:
    """A client that is not a configured balancer cannot choose its source: its PROXY header
    closes the connection; without one it is served as it is."""
    base, key = keyed
    args = _keyed_server_args(base, "--proxy-protocol", "127.0.0.9")
    with served_http(args, tool_env()) as served:
        address = _address(served.url)
        with socket.create_connection(address, timeout=10, source_address=(TENANT, 0)) as forger:
            forger.sendall(b"PROXY TCP4 192.0.2.1 127.0.0.1 1234 80\r\n" + PARTIAL_HEAD + b"\r\n")
            assert forger.recv(4096) == b""  # closed, not answered
        assert anyio.run(_call_on_new_connection, served.url, key, "direct") == "direct"
