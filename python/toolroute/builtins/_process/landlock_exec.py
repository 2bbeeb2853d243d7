"""Run a command under Landlock so it may write only beneath the given paths (the fallback sandbox).

This file is exec'd as a script (`python -I -S landlock_exec.py STATUS_FD HOST_PID [OPTION...]
PATH... -- ARGV...`) in the child, between fork and bash: applying the ruleset there, rather than in a
`preexec_fn`, keeps the parent's threads out of harm's way. It must import nothing from toolroute
(it runs with -S). On any failure it writes the reason to STATUS_FD and exits 127; on success exec
closes STATUS_FD (close-on-exec), so the parent reads EOF. A STATUS_FD of `-` (a spawner that
passes no descriptor: the MCP SDK's, for a tenant's own server) sends the reason to stderr.
ARGV[0] is looked up on the command's PATH.

Options:
- `--read=PATH` (the minimal view): reading and executing are restricted too, to the PATHs given
  and the writable PATHs; everything else (other workspaces, home folders, /proc) is unreadable.
  `--list=PATH` makes a folder listable only (a folder some of whose entries stay hidden).
  Signals and abstract unix sockets are then scoped to the command (Landlock ABI 6+), so it can
  neither signal nor connect to processes outside its sandbox.
- `--uid=N`: drop to uid and gid N (no supplementary groups) before anything else is armed.
- `--no-network`: a seccomp filter that refuses every socket but unix ones (and io_uring, which
  can open sockets without socket(2)).
- `--no-unix-sockets` (the minimal view): the filter refuses unix sockets too. Landlock does not
  govern `connect()` on a named socket, so without it a command could reach any socket of the
  host whose folder its uid may search: a database's, the server's own registry.
- `--no-pdeathsig`: no parent-death signal. The signal follows the thread that forked the
  helper; a spawner whose thread may end before the command (the MCP SDK's, on whichever thread
  runs the gateway's loop) must not arm it (the host's watchdog ends the command instead).
- `--no-landlock` (starting bubblewrap as a tenant's uid, where the spawner cannot switch uids):
  no ruleset, bubblewrap confines; with `--seccomp-fd=N`, the socket filter (no unix sockets;
  no network either with `--no-network`) is left in a memfd at descriptor N for `--seccomp N`.
Otherwise the command is also killed if the host dies (PR_SET_PDEATHSIG, kept across exec).
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import sys
from collections.abc import Sequence

# Syscall numbers are the same on x86_64 and aarch64 (the unified table since Linux 5.13).
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
EXECUTE = 1 << 0
READ_FILE = 1 << 2
READ_DIR = 1 << 3
READS = EXECUTE | READ_FILE | READ_DIR
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_ABI1_WRITES = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM
_ABI1_WRITES |= MAKE_CHAR | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK
# The only rights a rule on a file (not a directory) may carry, among the ones handled here.
_FILE_RIGHTS = WRITE_FILE | TRUNCATE | EXECUTE | READ_FILE


class LandlockError(OSError):
    pass


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fail(call: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"{call} failed: {os.strerror(err)}")


def abi_version(libc: ctypes.CDLL | None = None) -> int:
    """The kernel's Landlock ABI version; raises LandlockError when Landlock is unavailable."""
    libc = libc or _libc()
    version = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    if version < 0:
        raise _fail("landlock_create_ruleset (version probe)")
    return int(version)


def handled_writes(abi: int) -> int:
    """Every write-like right this ABI knows; all of them are denied outside the allowed paths."""
    rights = _ABI1_WRITES
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # e.g. no /tmp: nothing to allow there
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))  # packed struct
        if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0) < 0:
            raise _fail(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def restrict_writes(paths: list[str], readable: list[str] | None = None, listable: Sequence[str] = ()) -> None:
    """Confine this process (and what it execs) to writing beneath `paths` only; with
    `readable`, also to reading beneath `paths` and `readable` only (and listing `listable`)."""
    libc = _libc()
    abi = abi_version(libc)
    handled = handled_writes(abi)
    if readable is None:
        attr = ctypes.create_string_buffer(struct.pack("=Q", handled))
    else:
        handled |= READS
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
        attr = ctypes.create_string_buffer(struct.pack("=QQQ", handled, 0, scoped))
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(len(attr.raw)), 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for path in paths:
            _add_rule(libc, ruleset, path, handled)
        for path in readable or ():
            _add_rule(libc, ruleset, path, READS)
        for path in listable if readable is not None else ():
            _add_rule(libc, ruleset, path, READ_DIR)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


# ---- seccomp: no network, no unix sockets ---------------------------------------------------

# (audit arch, socket, io_uring_setup) per machine; the seccomp_data layout is nr, arch, ip, args.
_ARCHES = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
AF_UNIX = 1
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_X32_BIT = 0x40000000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
EPERM, EACCES, EAFNOSUPPORT = 1, 13, 97


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def socket_filter(machine: str, *, network: bool, unix: bool) -> bytes:
    """A classic BPF program (the raw `sock_filter` array, as bubblewrap's `--seccomp` reads it):
    socket() of a family other than AF_UNIX fails unless `network`, socket(AF_UNIX) fails unless
    `unix` (a named socket's path is not the filter's to see: Landlock does not govern connect,
    so a host socket such as a database's cannot be told apart from a tenant's own), and
    io_uring_setup() fails (it can open sockets without socket(2)). socketpair() stays allowed:
    an unnamed pair reaches nothing outside the command."""
    if machine not in _ARCHES:
        raise LandlockError(0, f"no seccomp socket filter for machine {machine!r}")
    arch, socket_nr, uring_nr = _ARCHES[machine]
    refuse = _SECCOMP_RET_ERRNO | EPERM
    other = _SECCOMP_RET_ALLOW if network else _SECCOMP_RET_ERRNO | EAFNOSUPPORT
    own = _SECCOMP_RET_ALLOW if unix else _SECCOMP_RET_ERRNO | EACCES
    return b"".join(
        [
            _insn(_BPF_LD_W_ABS, 0, 0, 4),  # 0: arch
            _insn(_BPF_JEQ_K, 1, 0, arch),
            _insn(_BPF_RET_K, 0, 0, refuse),  # 2: a foreign ABI (e.g. i386 socketcall)
            _insn(_BPF_LD_W_ABS, 0, 0, 0),  # 3: syscall number
            _insn(_BPF_JGE_K, 3, 0, _X32_BIT),  # 4: x32 numbers -> 8
            _insn(_BPF_JEQ_K, 3, 0, socket_nr),  # 5: socket -> 9
            _insn(_BPF_JEQ_K, 1, 0, uring_nr),  # 6: io_uring_setup -> 8
            _insn(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
            _insn(_BPF_RET_K, 0, 0, refuse),  # 8
            _insn(_BPF_LD_W_ABS, 0, 0, 16),  # 9: args[0], the family (low 32 bits)
            _insn(_BPF_JEQ_K, 0, 1, AF_UNIX),
            _insn(_BPF_RET_K, 0, 0, own),
            _insn(_BPF_RET_K, 0, 0, other),
        ]
    )


def deny_sockets(*, network: bool, unix: bool) -> None:
    """Install the socket filter on this process (no_new_privs must already be set)."""
    libc = _libc()
    program = socket_filter(os.uname().machine, network=network, unix=unix)
    filt = ctypes.create_string_buffer(program)
    fprog = ctypes.create_string_buffer(struct.pack("@HP", len(program) // 8, ctypes.addressof(filt)))
    ulong = ctypes.c_ulong
    if libc.prctl(ulong(PR_SET_SECCOMP), ulong(SECCOMP_MODE_FILTER), fprog, ulong(0), ulong(0)) < 0:
        raise _fail("prctl(PR_SET_SECCOMP)")


def die_with_parent(host: int) -> None:
    """SIGKILL this process (and so the command it execs) when the host dies."""
    ulong = ctypes.c_ulong
    if _libc().prctl(ulong(PR_SET_PDEATHSIG), ulong(9), ulong(0), ulong(0), ulong(0)) < 0:
        raise _fail("prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != host:  # the host died before the signal was armed
        os._exit(137)


def drop_to(uid: int) -> None:
    """Become uid and gid `uid`, with no supplementary groups (before PDEATHSIG: a credential
    change clears it)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def seccomp_at(fd: int, *, network: bool) -> None:
    """Put the filter refusing unix sockets (and, unless `network`, every other family) in a
    memfd at descriptor `fd`, left open across exec: bubblewrap's `--seccomp fd` reads it."""
    program = socket_filter(os.uname().machine, network=network, unix=False)
    made = os.memfd_create("toolroute-seccomp", 0)
    os.write(made, program)
    os.lseek(made, 0, os.SEEK_SET)
    if made != fd:
        os.dup2(made, fd, inheritable=True)
        os.close(made)


def main(argv: list[str]) -> None:
    status_fd = -1 if argv[1] == "-" else int(argv[1])
    sep = argv.index("--")
    host, options, command = int(argv[2]), argv[3:sep], argv[sep + 1 :]
    network = "--no-network" not in options
    unix = "--no-unix-sockets" not in options
    readable = [o.removeprefix("--read=") for o in options if o.startswith("--read=")]
    listable = [o.removeprefix("--list=") for o in options if o.startswith("--list=")]
    uids = [int(o.removeprefix("--uid=")) for o in options if o.startswith("--uid=")]
    seccomp_fds = [int(o.removeprefix("--seccomp-fd=")) for o in options if o.startswith("--seccomp-fd=")]
    paths = [p for p in options if not p.startswith("--")]
    try:
        if status_fd >= 0:
            os.set_inheritable(status_fd, False)
        for uid in uids:
            drop_to(uid)
        if "--no-pdeathsig" not in options:
            die_with_parent(host)
        if "--no-landlock" in options:  # bubblewrap confines what this execs
            for fd in seccomp_fds:
                seccomp_at(fd, network=network)
        else:
            restrict_writes(paths, readable if readable else None, listable)
            if not network or not unix:
                deny_sockets(network=network, unix=unix)
        # Python ignores SIGPIPE (and SIGXFSZ), and an ignored signal stays ignored across exec:
        # the command gets the defaults, as subprocess gives its children (pasta refuses to
        # start with SIGPIPE ignored, and `yes | head` would never end).
        for name in ("SIGPIPE", "SIGXFSZ"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.execvp(command[0], command)
    except BaseException as exc:
        message = f"Landlock sandbox could not start the command: {exc}".encode()
        os.write(status_fd if status_fd >= 0 else 2, message)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
