"""The serve stage's shared fixtures: a registry on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _postgres import postgres_server

from toolroute.serve.store import UserStore


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    """A PostgreSQL server of the module's own."""
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UserStore]:
    """An empty registry on each backend; a module seeds it by overriding `store(store)`."""
    sqlite = f"sqlite:///{tmp_path / 'users.db'}"
    url = sqlite if request.param == "sqlite" else request.getfixturevalue("postgres_dsn")
    with UserStore(url) as s:
        yield s
        for user in s.users():  # the PostgreSQL server is shared by the module's tests
            s.remove_user(user)
