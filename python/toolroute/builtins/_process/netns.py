"""A network namespace of its own for each networked command, reaching the internet only.

A command with `sandbox_network="internet"` (or an allowlist) runs as
`pasta ... -- sh -c 'ip -batch RULES && exec bwrap ...'`:
- **pasta** (Debian package `passt`) creates a user and a network namespace and translates the
  namespace's TCP, UDP and ICMP into sockets of the host: user-mode NAT, no privilege. Its
  forwarding into the host's loopback is off (`-T none -U none`, `--no-map-gw`: the gateway is not
  the host), as is forwarding of the host's ports into the namespace (`-t none -u none`: nothing a
  command listens on is exposed). DNS goes to a fixed address (`NAMESERVER`) that pasta maps to
  the host's resolver (`--dns-forward`), whatever that is (a loopback or private resolver too);
  a resolver of the context's own (`sandbox_dns`) is asked directly instead.
- **`ip -batch`** then installs routing rules in the new namespace, while the shell still holds
  the namespace's capabilities: every destination that is not the internet is `prohibit`ed
  (`BLOCKED_NETWORKS`: loopback, RFC 1918, CGNAT, link-local and so the metadata addresses,
  RFC 4193, multicast, reserved; and the host's own addresses and gateways, read per command),
  except port 53 of the resolver. The namespace's own loopback and address are local (the
  `local` table comes first), so they reach the namespace only, never the host.
- **bubblewrap** runs the command in a user namespace nested in pasta's with `--cap-drop ALL`:
  no capability over the network namespace, whose owner is pasta's user namespace, so the rules
  cannot be undone (`ip rule del` fails with EPERM), and no raw or packet sockets.

An allowlist (`sandbox_network=("pypi.org", ...)`) prohibits every destination that is not
local, and forwards two ports of the namespace's loopback to the host's `egress.py` proxy
(`-T PROXY_PORT:port`, `-U 53:port`): the command reaches the proxy and its DNS and nothing else.

pasta needs unprivileged user namespaces and a usable `/dev/net/tun`; this version of it cannot
map its namespace when started as root, so a root host runs it as the commands' own uid (served
mode's tenants have one) and refuses a command that has none.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from toolroute.context import SandboxNetwork

PROBE_TIMEOUT = 20.0
# Where a namespace's resolv.conf points under "internet": pasta maps UDP port 53 there to the
# host's resolver. It lies in a prohibited range, so nothing but DNS reaches it.
NAMESERVER = "169.254.0.53"
# The ports an allowlisted command finds the proxy and its DNS at, on its own loopback.
PROXY_PORT = 3128
DNS_PORT = 53

# What a command of "internet" may not reach (and what the allowlist's proxy refuses to connect
# to, after resolving): everything that is not the public internet. Documentation ranges
# (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are not routed on the internet
# and are left alone; the host's own addresses are added per command (`host_addresses`).
BLOCKED_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # CGNAT (RFC 6598): often a provider's internal network
        "127.0.0.0/8",  # loopback (the namespace's own is local anyway)
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",  # IETF protocol assignments
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "::/128",
        "::1/128",
        "::ffff:0:0/96",  # IPv4-mapped
        "64:ff9b::/96",  # NAT64: would reach private IPv4 through a translator
        "64:ff9b:1::/48",
        "100::/64",  # discard
        "2001::/32",  # Teredo
        "2002::/16",  # 6to4: embeds any IPv4 address
        "fc00::/7",  # RFC 4193 unique local, metadata (fd00:ec2::254)
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)


def blocked(address: ipaddress.IPv4Address | ipaddress.IPv6Address, host: Iterable[str] = ()) -> bool:
    """Whether `address` is not the internet: in `BLOCKED_NETWORKS`, one of `host`'s addresses,
    or an IPv4-mapped IPv6 address of a blocked IPv4 one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return True
    if any(address in net for net in BLOCKED_NETWORKS if net.version == address.version):
        return True
    return any(address == ipaddress.ip_address(h) for h in host)


# ---- what the host is ---------------------------------------------------------------------


def host_addresses() -> tuple[str, ...]:
    """The host's own addresses and its default gateways (pasta reaches them as it reaches the
    internet, so each is prohibited by name): read from /proc on every call, as interfaces come and go."""
    found: list[str] = []
    try:
        last = None
        for line in Path("/proc/net/fib_trie").read_text().splitlines():
            text = line.strip()
            if text.startswith(("|--", "+--")):
                last = text[3:].strip().split()[0]
            elif text.startswith("/32 host LOCAL") and last:
                found.append(last)
        for line in Path("/proc/net/route").read_text().splitlines()[1:]:
            _, destination, gateway, *_ = line.split()
            if destination == "00000000" and gateway != "00000000":  # a default route's gateway
                found.append(str(ipaddress.IPv4Address(bytes.fromhex(gateway)[::-1])))
    except (OSError, ValueError, IndexError):
        pass
    try:
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            found.append(str(ipaddress.IPv6Address(bytes.fromhex(line.split()[0]))))
        for line in Path("/proc/net/ipv6_route").read_text().splitlines():
            destination, length, _, _, gateway, *_ = line.split()
            if not destination.strip("0") and length == "00" and gateway.strip("0"):
                found.append(str(ipaddress.IPv6Address(bytes.fromhex(gateway))))
    except (OSError, ValueError, IndexError):
        pass
    return tuple(dict.fromkeys(found))


# ---- the files a namespace is set up from ---------------------------------------------------


class _Files:
    """Rules and resolv.conf files, one per content, in a 0711 folder of the host's temp dir:
    read by `ip` and bubblewrap as the commands' uids, written once, removed at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: Path | None = None

    def path(self, name: str, content: str) -> Path:
        digest = hashlib.sha256(content.encode()).hexdigest()[:20]
        with self._lock:
            if self._base is None:
                self._base = Path(tempfile.mkdtemp(prefix="toolroute-netns-"))
                os.chmod(self._base, 0o711)
                import atexit

                atexit.register(shutil.rmtree, self._base, True)
            path = self._base / f"{name}-{digest}"
            if not path.exists():
                partial = path.with_suffix(".part")
                partial.write_text(content)
                os.chmod(partial, 0o644)
                partial.replace(path)
            return path


FILES = _Files()


def _rules(policy: SandboxNetwork, host: Iterable[str], dns: str | None) -> tuple[str, str]:
    """The `ip -batch` text for IPv4 and IPv6: what the namespace may not reach (DNS to its
    resolver excepted)."""
    v4: list[str] = []
    v6: list[str] = []
    if policy == "internet":
        server = dns or NAMESERVER
        for protocol in ("udp", "tcp"):
            (v6 if ":" in server else v4).append(
                f"rule add prio 10 to {server} ipproto {protocol} dport 53 lookup main"
            )
        targets = [str(n) for n in BLOCKED_NETWORKS] + [str(ipaddress.ip_network(h)) for h in host]
        for target in dict.fromkeys(targets):
            (v6 if ":" in target else v4).append(f"rule add prio 20 to {target} prohibit")
    else:  # an allowlist: nothing but the namespace's own (local) addresses
        v4.append("rule add prio 20 prohibit")
        v6.append("rule add prio 20 prohibit")
    return "\n".join(v4) + "\n", "\n".join(v6) + "\n"


def resolv_conf(policy: SandboxNetwork, dns: str | None) -> Path:
    """The resolv.conf a networked command sees: the resolver asked for (`sandbox_dns`, reached
    through the NAT), else pasta's mapping of the host's; the proxy's DNS for an allowlist."""
    server = (dns or NAMESERVER) if policy == "internet" else "127.0.0.1"
    return FILES.path("resolv.conf", f"# toolroute: the namespace's resolver\nnameserver {server}\noptions edns0\n")


# ---- probing --------------------------------------------------------------------------------


def _tool(name: str) -> str | None:
    # `ip` lives in /usr/sbin, often off a service's PATH; pasta is looked up on PATH alone.
    return shutil.which(name) or (shutil.which(name, path="/usr/sbin:/sbin") if name == "ip" else None)


@functools.cache
def tools() -> tuple[str, str, str]:
    """The paths of pasta, ip and sh, once checked to give a namespace here; raises
    NetworkUnavailable with the reason (never a silent fallback to the host's network)."""
    pasta, ip, sh = _tool("pasta"), _tool("ip"), _tool("sh")
    if pasta is None:
        raise NetworkUnavailable(
            "pasta is not installed (Debian/Ubuntu package: passt), so commands cannot get a network "
            "namespace of their own; without it they get no network (never the host's)"
        )
    if ip is None or sh is None:
        raise NetworkUnavailable(
            "the `ip` command (Debian package iproute2) is needed to confine the network namespace"
        )
    if os.geteuid() == 0 and not _tun_usable_by_others():
        raise NetworkUnavailable(
            "/dev/net/tun cannot be opened by the commands' uids (it is usually mode 0666, as udev sets it: "
            "`chmod 0666 /dev/net/tun`), so pasta cannot give them a network namespace"
        )
    return pasta, ip, sh


def _tun_usable_by_others() -> bool:
    try:
        return os.stat("/dev/net/tun").st_mode & 0o006 == 0o006
    except OSError:
        return False


def probe(uid: int | None) -> None:
    """Start one namespace as `uid` (None: this process's own) and check it is configured;
    raises NetworkUnavailable with pasta's own words otherwise. Once per process for this
    process's own uid and once for any other (what pasta needs does not differ between uids:
    a tenant's first command does not pay a probe of its own)."""
    own = uid is None or uid == os.geteuid()
    with _PROBE_LOCK:
        if own not in _PROBED:
            try:
                _probe(uid)
                _PROBED[own] = None
            except NetworkUnavailable as exc:
                _PROBED[own] = exc
        failed = _PROBED[own]
    if failed is not None:
        raise NetworkUnavailable(str(failed))


_PROBE_LOCK = threading.Lock()
_PROBED: dict[bool, NetworkUnavailable | None] = {}


def _probe(uid: int | None) -> None:
    pasta, ip, _ = tools()
    if uid is None and os.geteuid() == 0:
        raise NetworkUnavailable(
            "pasta cannot map its namespace when started as root: a networked command needs a uid of its "
            "own (sandbox_uid; served mode gives each tenant one)"
        )
    argv = [pasta, *_pasta_options(), "--", ip, "-o", "-4", "addr", "show", "scope", "global"]
    identity = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    try:
        done = subprocess.run(  # type: ignore[call-overload]
            argv, capture_output=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL, cwd="/", **identity
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkUnavailable(f"pasta could not be run: {exc}") from None
    if done.returncode != 0 or b"inet " not in done.stdout:
        said = (done.stderr or b"").decode("utf-8", "replace")
        said = "; ".join(line for line in said.splitlines() if "syslog" not in line).strip()
        raise NetworkUnavailable(
            f"pasta cannot give a command a network namespace here (unprivileged user namespaces, "
            f"/dev/net/tun?): {said or f'exit code {done.returncode}'}"
        )


class NetworkUnavailable(RuntimeError):
    """User-mode networking cannot be had here; the message says why."""


# ---- the argv -------------------------------------------------------------------------------


def _pasta_options() -> list[str]:
    # -q: no banner; -f: stay the command's parent (its exit is the command's); no port is
    # forwarded either way, and the gateway is not the host.
    return ["--config-net", "-q", "-f", "-t", "none", "-u", "none", "--no-map-gw"]


def wrap(
    inner: list[str], policy: SandboxNetwork, *, uid: int | None, dns: str | None, proxy: tuple[int, int] | None
) -> list[str]:
    """`inner` (a bwrap argv) started in a network namespace of its own, confined to `policy`.
    `proxy` is the host's proxy and DNS ports for an allowlist."""
    pasta, ip, sh = tools()
    probe(uid)
    v4, v6 = _rules(policy, host_addresses() if policy == "internet" else (), dns)
    rules4, rules6 = FILES.path("rules4", v4), FILES.path("rules6", v6)
    options = _pasta_options()
    if policy == "internet":
        options += ["-T", "none", "-U", "none"]
        # Without a resolver of its own, DNS to NAMESERVER is the host's resolver's, whatever
        # that is (a loopback or private one too: pasta asks it from the host).
        options += [] if dns else ["--dns-forward", NAMESERVER]
    else:
        if proxy is None:
            raise NetworkUnavailable("an allowlisted command needs the egress proxy's ports")
        options += ["-T", f"{PROXY_PORT}:{proxy[0]}", "-U", f"{DNS_PORT}:{proxy[1]}"]
    # A kernel without IPv6 has no IPv6 to confine: its rules may fail there, and only there.
    v6_rules = f"{{ {ip} -6 -batch {rules6} || ! test -e /proc/net/if_inet6; }}"
    script = f'{ip} -batch {rules4} && {v6_rules} && exec "$@"'
    return [pasta, *options, "--", sh, "-c", script, "toolroute-netns", *inner]
