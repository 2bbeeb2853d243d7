"""The egress proxy of allowlisted commands: HTTP(S) and SOCKS5 to allowed domains only, and DNS.

A command with `sandbox_network=("pypi.org", "*.pythonhosted.org")` runs in a network namespace
whose only way out is this proxy (netns.py): its loopback port `netns.PROXY_PORT` leads here,
with `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` (SOCKS5, names resolved here) set for it, and
its resolver (loopback port 53) is `_Dns` here. One proxy per process, on the host's loopback,
in a thread of its own (its own event loop: a tenant's downloads never queue behind the MCP
server's requests):
- **Who asks** is told by the credentials in the proxy URL the command was given (a random
  token per owner and allowlist), never by the source address; a client without them (another
  user of the host, say) gets 407.
- **Where to**: the host name must match the allowlist (`pypi.org` exactly, `*.pypi.org` any
  name beneath, not pypi.org itself); then it is resolved *here* and only addresses that are
  the internet are dialled (`netns.blocked`: no loopback, private, link-local or metadata
  address, none of the host's own), so a name that resolves inward (DNS rebinding) is refused
  too. The address checked is the address connected to.
- **Refused**: HTTP 403 whose body names the rule, SOCKS5 reply 2 ("not allowed by ruleset"),
  and each listener (`EGRESS.listen`: served mode's audit log) is told, with the owner.
- **DNS**: names outside the allowlist get NXDOMAIN; allowed names get their public addresses.
- **Bounds**: a request head within `HEAD_TIMEOUT` and `HEAD_LIMIT` bytes, a connect within
  `CONNECT_TIMEOUT`, at most `PER_OWNER` connections per owner and `TOTAL` in all.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import ipaddress
import secrets
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import dns.asyncresolver
import dns.exception
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.resolver
import dns.rrset
import h11

from toolroute.builtins._process import netns

HEAD_TIMEOUT = 10.0
HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT = 10.0
RESOLVE_TIMEOUT = 5.0
PER_OWNER = 64
TOTAL = 1024
DNS_TTL = 30
USER = "toolroute"  # the user name of the proxy credentials; the token is the password


@dataclass(frozen=True)
class Ticket:
    """Whom a token speaks for, and what it may reach."""

    owner: str | None
    allow: tuple[str, ...]
    dns: str | None  # the resolver asked (None: the host's, through getaddrinfo)


@dataclass(frozen=True)
class Refusal:
    """A connection the proxy refused, as its listeners are told."""

    owner: str | None
    host: str
    port: int
    reason: str
    via: str  # "connect", "http" or "socks5"


@dataclass(frozen=True)
class Endpoint:
    """Where a command of one ticket finds the proxy (host loopback ports) and its token."""

    proxy_port: int
    dns_port: int
    token: str

    def environment(self) -> dict[str, str]:
        """The proxy variables a command gets (both spellings: curl reads only the lower-case
        http_proxy; pip, npm and git read either)."""
        url = f"http://{USER}:{self.token}@127.0.0.1:{netns.PROXY_PORT}"
        socks = f"socks5h://{USER}:{self.token}@127.0.0.1:{netns.PROXY_PORT}"
        out = {"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1"}
        for name in ("HTTP_PROXY", "HTTPS_PROXY"):
            out[name] = out[name.lower()] = url
        out["ALL_PROXY"] = out["all_proxy"] = socks
        return out


def matches(host: str, patterns: Iterable[str]) -> str | None:
    """The allowlist entry `host` falls under, or None."""
    name = host.lower().rstrip(".")
    for pattern in patterns:
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
                return pattern
        elif name == pattern:
            return pattern
    return None


class _Denied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EgressProxy:
    """The process's one proxy; started on first use, lives as long as the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxy_port = 0
        self._dns_ports: dict[tuple[tuple[str, ...], str | None], int] = {}
        self._tokens: dict[Ticket, str] = {}
        self._tickets: dict[str, Ticket] = {}
        self._listeners: list[Callable[[Refusal], None]] = []
        self._open: dict[str | None, int] = {}
        self._open_total = 0

    # ---- the host's side ----------------------------------------------------------------

    def endpoint(self, allow: tuple[str, ...], owner: str | None, dns_server: str | None) -> Endpoint:
        """The ports and token of `owner`'s commands under `allow` (made on first use)."""
        ticket = Ticket(owner, allow, dns_server)
        with self._lock:
            loop = self._start()
            token = self._tokens.get(ticket)
            if token is None:
                token = secrets.token_urlsafe(18)
                self._tokens[ticket], self._tickets[token] = token, ticket
            key = (allow, dns_server)
            if key not in self._dns_ports:
                made = asyncio.run_coroutine_threadsafe(self._open_dns(allow, dns_server), loop)
                self._dns_ports[key] = made.result(timeout=10)
            return Endpoint(self._proxy_port, self._dns_ports[key], token)

    def listen(self, listener: Callable[[Refusal], None]) -> Callable[[], None]:
        """Tell `listener` of every refused connection (on the proxy's thread: keep it short);
        returns the function that stops it."""
        with self._lock:
            self._listeners.append(listener)

        def stop() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return stop

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None:
            return self._loop
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="toolroute-egress", daemon=True).start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_LIMIT), loop
        ).result(timeout=10)
        self._proxy_port = server.sockets[0].getsockname()[1]
        self._loop = loop
        return loop

    async def _open_dns(self, allow: tuple[str, ...], dns_server: str | None) -> int:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Dns(self, allow, dns_server), local_addr=("127.0.0.1", 0)
        )
        port: int = transport.get_extra_info("sockname")[1]
        return port

    def _refused(self, refusal: Refusal) -> None:
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener's failure never becomes the proxy's
                listener(refusal)

    # ---- one client ---------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await asyncio.wait_for(reader.readexactly(1), HEAD_TIMEOUT)
            if first == b"\x05":
                await self._socks5(reader, writer)
            else:
                await self._http(first, reader, writer)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except ValueError:  # a head over the StreamReader's limit
            pass
        finally:
            writer.close()

    async def _http(self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = first + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        parser = h11.Connection(h11.SERVER)
        parser.receive_data(head)
        try:
            request = parser.next_event()
        except h11.RemoteProtocolError:
            return await _reply(writer, 400, "toolroute proxy: not an HTTP request")
        if not isinstance(request, h11.Request):
            return await _reply(writer, 400, "toolroute proxy: not an HTTP request")
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.headers]
        ticket = self._ticket(dict(headers).get("proxy-authorization", ""))
        if ticket is None:
            return await _reply(
                writer,
                407,
                "toolroute proxy: credentials missing or unknown (use the proxy URL your sandbox was given)",
                [("Proxy-Authenticate", 'Basic realm="toolroute"')],
            )
        method, target = request.method.decode("latin-1"), request.target.decode("latin-1")
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            host, path, via = host.strip("[]"), "", "connect"
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                return await _reply(writer, 400, f"toolroute proxy: {target!r} is not an absolute http:// URL")
            host, port_text, via = url.hostname, str(url.port or 80), "http"
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return await _reply(writer, 400, f"toolroute proxy: bad port in {target!r}")
        port = int(port_text)
        try:
            with self._slot(ticket.owner):
                upstream_reader, upstream_writer = await self._dial(ticket, host, port, via)
                try:
                    if method == "CONNECT":
                        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    else:
                        kept = [(k, v) for k, v in headers if k not in _HOP_BY_HOP]
                        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in kept), "Connection: close"]
                        upstream_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                    await _splice(reader, writer, upstream_reader, upstream_writer)
                finally:
                    upstream_writer.close()
        except _Denied as denied:
            await _reply(writer, 403, f"toolroute: connection to {host}:{port} refused: {denied.reason}\n")

    async def _socks5(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        count = (await _read(reader, 1))[0]
        methods = await _read(reader, count)
        if 2 not in methods:  # username/password: the token is the password
            writer.write(b"\x05\xff")
            return await writer.drain()
        writer.write(b"\x05\x02")
        version, user_length = await _read(reader, 2)
        await _read(reader, user_length)
        password = await _read(reader, (await _read(reader, 1))[0])
        ticket = self._tickets.get(password.decode("latin-1")) if version == 1 else None
        writer.write(b"\x01\x00" if ticket is not None else b"\x01\x01")
        await writer.drain()
        if ticket is None:
            return
        _, command, _, kind = await _read(reader, 4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(await _read(reader, 4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await _read(reader, 16)))
        elif kind == 3:
            host = (await _read(reader, (await _read(reader, 1))[0])).decode("ascii", "replace")
        else:
            writer.write(b"\x05\x08\x00\x01" + bytes(6))  # address type not supported
            return await writer.drain()
        (port,) = struct.unpack("!H", await _read(reader, 2))
        if command != 1:
            writer.write(b"\x05\x07\x00\x01" + bytes(6))  # only CONNECT
            return await writer.drain()
        try:
            with self._slot(ticket.owner):
                upstream_reader, upstream_writer = await self._dial(ticket, host, port, "socks5")
                try:
                    writer.write(b"\x05\x00\x00\x01" + bytes(6))
                    await _splice(reader, writer, upstream_reader, upstream_writer)
                finally:
                    upstream_writer.close()
        except _Denied:
            writer.write(b"\x05\x02\x00\x01" + bytes(6))  # connection not allowed by ruleset
            await writer.drain()

    def _ticket(self, authorization: str) -> Ticket | None:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            _, _, token = base64.b64decode(encoded.strip(), validate=True).decode("latin-1").partition(":")
        except (binascii.Error, ValueError):
            return None
        return self._tickets.get(token)

    @contextlib.contextmanager
    def _slot(self, owner: str | None) -> Iterator[None]:
        if self._open.get(owner, 0) >= PER_OWNER or self._open_total >= TOTAL:
            raise _Denied(f"too many open connections (at most {PER_OWNER} per user, {TOTAL} in all)")
        self._open[owner] = self._open.get(owner, 0) + 1
        self._open_total += 1
        try:
            yield
        finally:
            self._open[owner] -= 1
            self._open_total -= 1

    async def _dial(
        self, ticket: Ticket, host: str, port: int, via: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to `host:port` for `ticket`, or raise _Denied (and tell the listeners)."""
        try:
            rule = matches(host, ticket.allow)
            if rule is None:
                raise _Denied(f"{host} is not in the network allowlist ({', '.join(ticket.allow)})")
            addresses = await public_addresses(host, ticket.dns)
            if not addresses:
                raise _Denied(
                    f"{host} (allowed by {rule}) resolves to no public address: private, loopback, link-local, "
                    "metadata and this host's own addresses are never connected to"
                )
        except _Denied as denied:
            self._refused(Refusal(ticket.owner, host, port, denied.reason, via))
            raise
        last: Exception | None = None
        for address in addresses[:4]:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as exc:
                last = exc
        raise _Denied(f"could not connect to {host}:{port}: {last}")


async def public_addresses(host: str, dns_server: str | None) -> list[str]:
    """`host`'s addresses that are the internet (`netns.blocked` removes the rest); an IP
    literal is its own address. Resolved through `dns_server`, else the host's resolver."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        found = [str(literal)]
    elif dns_server is not None:
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = [dns_server]
        resolver.lifetime = RESOLVE_TIMEOUT
        found = []
        for kind in ("A", "AAAA"):
            with contextlib.suppress(dns.exception.DNSException):
                answer = await resolver.resolve(host, kind)
                found += [r.to_text() for r in answer]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            infos = []
        found = [str(info[4][0]) for info in infos]
    mine = netns.host_addresses()
    return [a for a in dict.fromkeys(found) if not netns.blocked(ipaddress.ip_address(a), mine)]


class _Dns(asyncio.DatagramProtocol):
    """The resolver an allowlisted namespace sees: allowed names' public addresses, NXDOMAIN
    for the rest."""

    def __init__(self, proxy: EgressProxy, allow: tuple[str, ...], dns_server: str | None) -> None:
        self._allow, self._dns = allow, dns_server
        self._transport: asyncio.DatagramTransport | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(self._pending) >= TOTAL:
            return  # a flood: dropped, as a busy resolver would
        task = asyncio.ensure_future(self._answer(data, addr))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _answer(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            query = dns.message.from_wire(data)
        except Exception:
            return
        response = dns.message.make_response(query)
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
        else:
            question = query.question[0]
            name = question.name.to_text(omit_final_dot=True)
            if matches(name, self._allow) is None:
                response.set_rcode(dns.rcode.NXDOMAIN)
            elif question.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                version = 4 if question.rdtype == dns.rdatatype.A else 6
                found = [
                    a for a in await public_addresses(name, self._dns) if ipaddress.ip_address(a).version == version
                ]
                if found:
                    rrset = dns.rrset.from_text_list(question.name, DNS_TTL, dns.rdataclass.IN, question.rdtype, found)
                    response.answer.append(rrset)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(response.to_wire(max_size=512), addr)


_HOP_BY_HOP = frozenset(
    {"proxy-authorization", "proxy-connection", "connection", "keep-alive", "te", "trailer", "upgrade"}
)


async def _read(reader: asyncio.StreamReader, count: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(count), HEAD_TIMEOUT)


async def _reply(
    writer: asyncio.StreamWriter, status: int, body: str, extra: list[tuple[str, str]] | None = None
) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 407: "Proxy Authentication Required"}
    data = body.encode()
    lines = [f"HTTP/1.1 {status} {reasons[status]}", "Content-Type: text/plain; charset=utf-8"]
    lines += [f"Content-Length: {len(data)}", "Connection: close", *(f"{k}: {v}" for k, v in extra or [])]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides have ended."""

    async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(1 << 16):
                sink.write(data)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()

    await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))


EGRESS = EgressProxy()
