"""The PROXY protocol (HAProxy's, versions 1 and 2): the client's address a balancer sends first.

Behind a TCP balancer every connection comes from the balancer, so admission's per-source share
(admission.py) would be one share for everyone. With `toolroute serve --proxy-protocol ADDRS`,
a connection from one of ADDRS (the balancers) must begin with a PROXY header, and the address in
it is the connection's source (and the ASGI scope's `client`); a connection from anyone else is
served as it is, and one of those that begins with a PROXY header is closed: a client cannot
choose its own source. Spec: https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable

V1_PREFIX = b"PROXY "
V1_MOST = 107  # bytes of a v1 line, CRLF included
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V2_MOST = 16 + 4096  # a header with its TLVs; more is refused
_V2_HEAD = struct.Struct("!12sBBH")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = tuple[str, int]


class ProxyHeaderError(ValueError):
    """A PROXY header that is malformed, or missing where one must be."""


def networks(spec: Iterable[str]) -> tuple[Network, ...]:
    """The balancers' addresses or networks (`10.0.0.5`, `10.0.1.0/24`, `::1`)."""
    out = []
    for item in spec:
        item = item.strip()
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"--proxy-protocol: {item!r} is not an IP address or network") from None
    return tuple(out)


def trusted(peer: object, balancers: tuple[Network, ...]) -> bool:
    """Whether `peer` (a socket's peername) is one of the balancers."""
    if not balancers or not isinstance(peer, tuple | list) or not peer or not isinstance(peer[0], str):
        return False
    try:
        address = ipaddress.ip_address(peer[0].split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in net for net in balancers)


def looks_like_header(data: bytes) -> bool:
    """Whether `data`, a connection's first bytes, begin a PROXY header (either version)."""
    return data.startswith(b"PROXY") or data[:12] == V2_SIGNATURE


def parse(data: bytes) -> tuple[Address | None, int] | None:
    """The header at the start of `data`: (the client's address, or None for a `LOCAL` or
    `UNKNOWN` one, which keeps the balancer's own; bytes it took), or None while incomplete."""
    if V2_SIGNATURE.startswith(data[:12]) and data:
        return _v2(data)
    if V1_PREFIX.startswith(data[:6]) and len(data) < len(V1_PREFIX):
        return None
    if data.startswith(V1_PREFIX):
        return _v1(data)
    raise ProxyHeaderError("the connection did not begin with a PROXY header")


def _v1(data: bytes) -> tuple[Address | None, int] | None:
    end = data.find(b"\r\n", 0, V1_MOST)
    if end < 0:
        if len(data) >= V1_MOST:
            raise ProxyHeaderError("a PROXY v1 line longer than 107 bytes")
        return None
    parts = data[:end].decode("ascii", "replace").split(" ")
    if len(parts) >= 2 and parts[1] == "UNKNOWN":
        return None, end + 2
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError("a malformed PROXY v1 line")
    try:
        address = ipaddress.ip_address(parts[2])
        port = int(parts[4])
    except ValueError:
        raise ProxyHeaderError("a malformed PROXY v1 address") from None
    if (address.version == 4) != (parts[1] == "TCP4") or not 0 <= port <= 65535:
        raise ProxyHeaderError("a malformed PROXY v1 address")
    return (str(address), port), end + 2


def _v2(data: bytes) -> tuple[Address | None, int] | None:
    if len(data) < 16:
        return None
    signature, version_command, family, length = _V2_HEAD.unpack_from(data)
    if signature != V2_SIGNATURE or version_command >> 4 != 2:
        raise ProxyHeaderError("a malformed PROXY v2 header")
    if 16 + length > V2_MOST:
        raise ProxyHeaderError("a PROXY v2 header longer than 4 KiB")
    if len(data) < 16 + length:
        return None
    body = data[16 : 16 + length]
    command = version_command & 0x0F
    if command == 0:  # LOCAL: the balancer's own connection (a health check)
        return None, 16 + length
    if command != 1:
        raise ProxyHeaderError("a PROXY v2 header with an unknown command")
    if family >> 4 == 1 and len(body) >= 12:  # AF_INET
        return (str(ipaddress.IPv4Address(body[0:4])), int.from_bytes(body[8:10], "big")), 16 + length
    if family >> 4 == 2 and len(body) >= 36:  # AF_INET6
        return (str(ipaddress.IPv6Address(body[0:16])), int.from_bytes(body[32:34], "big")), 16 + length
    return None, 16 + length  # AF_UNSPEC, AF_UNIX: no address to count under
