"""A real PostgreSQL server for one test session: initdb + pg_ctl into a temporary folder, listening
on 127.0.0.1 only, run as the unprivileged `postgres` account when the tests run as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _ports import free_port

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _binary(name: str) -> str | None:
    for folder in PG_BIN_DIRS:
        if (folder / name).is_file():
            return str(folder / name)
    return shutil.which(name)


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
    return [runuser, "-u", "postgres", "--", *cmd]


@contextmanager
def postgres_server(socket_dir: Path | None = None) -> Iterator[str]:
    """Yield the DSN of a fresh PostgreSQL server; stopped (and its folder removed) afterwards.
    With `socket_dir`, the DSN reaches it over its unix socket there (made, handed to the
    server's account), as a registry on the same machine is often reached, with trust auth:
    whoever connects to that socket is the registry's owner."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL server binaries (Debian package postgresql) are not installed")
    base = Path(tempfile.mkdtemp(prefix="toolroute-pg-"))
    data = base / "data"
    port = free_port()
    sockets = base if socket_dir is None else socket_dir
    sockets.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        try:
            shutil.chown(base, "postgres", "postgres")
            shutil.chown(sockets, "postgres", "postgres")
        except (LookupError, PermissionError):
            pytest.skip("no `postgres` account to run the server as")
    try:
        subprocess.run(
            _as_server_user([initdb, "-D", str(data), "-U", "toolroute", "--auth=trust", "-E", "UTF8"]),
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = f"-h 127.0.0.1 -p {port} -k {sockets} -c fsync=off"
        subprocess.run(
            _as_server_user(
                [pg_ctl, "-D", str(data), "-o", options, "-l", str(base / "log"), "-w", "-t", "60", "start"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        try:
            if socket_dir is None:
                yield f"postgresql://toolroute@127.0.0.1:{port}/postgres"
            else:
                yield f"postgresql://toolroute@/postgres?host={socket_dir}&port={port}"
        finally:
            subprocess.run(
                _as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop"]),
                capture_output=True,
                timeout=120,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
