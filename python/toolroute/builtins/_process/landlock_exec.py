"""Run a command under Landlock so it may write only beneath the given paths.

This file is exec'd as a script (`python -I -S landlock_exec.py STATUS_FD PATH... -- ARGV...`) in
the child, between fork and bash: applying the ruleset there, rather than in a `preexec_fn`, keeps
the parent's threads out of harm's way. It must import nothing from toolroute (it runs with -S).
On any failure it writes the reason to STATUS_FD and exits 127; on success exec closes STATUS_FD
(close-on-exec), so the parent reads EOF. Reading is never restricted, only writing.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

# Syscall numbers are the same on x86_64 and aarch64 (the unified table since Linux 5.13).
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

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

_ABI1_WRITES = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM
_ABI1_WRITES |= MAKE_CHAR | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK
# The only rights a rule on a file (not a directory) may carry, among the ones handled here.
_FILE_RIGHTS = WRITE_FILE | TRUNCATE


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


def restrict_writes(paths: list[str]) -> None:
    """Confine this process (and what it execs) to writing beneath `paths` only."""
    libc = _libc()
    handled = handled_writes(abi_version(libc))
    attr = ctypes.create_string_buffer(struct.pack("=Q", handled))
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(8), 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # e.g. no /tmp: nothing to allow there
            try:
                rights = handled if os.path.isdir(path) else handled & _FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))  # packed struct
                if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0) < 0:
                    raise _fail(f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


def main(argv: list[str]) -> None:
    status_fd = int(argv[1])
    sep = argv.index("--")
    paths, command = argv[2:sep], argv[sep + 1 :]
    try:
        os.set_inheritable(status_fd, False)
        restrict_writes(paths)
        os.execv(command[0], command)
    except BaseException as exc:
        os.write(status_fd, f"Landlock sandbox could not start the command: {exc}".encode())
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
