"""The user registry: the same behaviour on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from _postgres import postgres_server

from toolroute.errors import ToolArgumentError
from toolroute.serve.store import REDACTED, UserStore, key_digest

SERVER = {"command": "python3", "args": ["server.py"], "env": {"API_TOKEN": "s3cret-value"}}


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UserStore]:
    sqlite = f"sqlite:///{tmp_path / 'users.db'}"
    url = sqlite if request.param == "sqlite" else request.getfixturevalue("postgres_dsn")
    with UserStore(url) as s:
        yield s
        for user in s.users():  # the PostgreSQL server is shared by the module's tests
            s.remove_user(user)


def test_users_keys_and_servers_round_trip(store: UserStore) -> None:
    store.add_user("alice")
    store.add_user("bob-2")
    assert store.users() == ["alice", "bob-2"]
    key = store.add_key("alice")
    assert store.user_for_key(key) == "alice"
    assert store.user_for_key(key[:-1] + ("A" if key[-1] != "A" else "B")) is None  # one char off
    store.add_server("alice", "notes", SERVER)
    assert store.servers("alice") == {"notes": SERVER}
    assert store.servers("bob-2") == {}


def test_only_a_digest_of_a_key_is_stored(store: UserStore) -> None:
    store.add_user("alice")
    key = store.add_key("alice")
    rows = store._query("SELECT digest FROM toolroute_api_keys")
    assert rows == [(key_digest(key),)]
    assert key not in repr(rows)


def test_a_revoked_key_no_longer_names_its_user(store: UserStore) -> None:
    store.add_user("alice")
    key = store.add_key("alice")
    (info,) = store.keys("alice")
    store.revoke_key(info.key_id)
    assert store.user_for_key(key) is None
    with pytest.raises(ToolArgumentError, match="no active API key"):
        store.revoke_key(info.key_id)


@pytest.mark.parametrize("bad", ["", "trk_", "trk_0123456789abcdef_x", "Bearer x", "trk_" + "0" * 16 + "_" + "a" * 43])
def test_malformed_or_unknown_keys_name_nobody(store: UserStore, bad: str) -> None:
    store.add_user("alice")
    store.add_key("alice")
    assert store.user_for_key(bad) is None


def test_listings_redact_secrets(store: UserStore) -> None:
    store.add_user("alice")
    store.add_server("alice", "notes", {**SERVER, "headers": {"Authorization": "Bearer tok"}})
    shown = store.server_listing("alice")["notes"]
    assert shown["env"] == {"API_TOKEN": REDACTED}
    assert shown["headers"] == {"Authorization": REDACTED}
    assert "s3cret-value" not in repr(shown) and "Bearer tok" not in repr(shown)


@pytest.mark.parametrize("user", ["../etc", "a b", "", "x" * 65, "é"])
def test_user_ids_outside_the_alphabet_are_refused(store: UserStore, user: str) -> None:
    with pytest.raises(ToolArgumentError):
        store.add_user(user)


def test_duplicates_and_unknown_users_are_clear_errors(store: UserStore) -> None:
    store.add_user("alice")
    with pytest.raises(ToolArgumentError, match="already exists"):
        store.add_user("alice")
    with pytest.raises(ToolArgumentError, match="no user 'carol'"):
        store.add_key("carol")
    with pytest.raises(ToolArgumentError, match="no user 'carol'"):
        store.add_server("carol", "notes", SERVER)
    store.add_server("alice", "notes", SERVER)
    with pytest.raises(ToolArgumentError, match="already has a server"):
        store.add_server("alice", "notes", SERVER)
    store.add_server("alice", "notes", {"command": "other"}, replace=True)
    assert store.servers("alice") == {"notes": {"command": "other"}}


def test_a_bad_server_config_is_refused_before_it_is_stored(store: UserStore) -> None:
    store.add_user("alice")
    with pytest.raises(ToolArgumentError):
        store.add_server("alice", "notes", {"comand": "typo"})
    assert store.servers("alice") == {}


def test_removing_a_user_removes_their_keys_and_servers(store: UserStore) -> None:
    store.add_user("alice")
    key = store.add_key("alice")
    store.add_server("alice", "notes", SERVER)
    store.remove_user("alice")
    assert store.user_for_key(key) is None
    assert store.servers("alice") == {}
    assert store.keys() == []


def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'users.db'}"
    with UserStore(url) as first:
        first.add_user("alice")
        version = first.schema_version
    assert version >= 1
    with UserStore(url) as again:  # reopening applies nothing twice and keeps the data
        assert again.schema_version == version
        assert again.users() == ["alice"]
    with sqlite3.connect(tmp_path / "users.db") as raw:
        assert raw.execute("SELECT COUNT(*) FROM toolroute_schema").fetchone() == (version,)


def test_two_stores_on_one_postgres_database_see_each_others_writes(postgres_dsn: str) -> None:
    """What replicas rely on: a key made through one replica's store works through another's."""
    with UserStore(postgres_dsn) as one, UserStore(postgres_dsn) as two:
        one.add_user("shared-user")
        try:
            key = one.add_key("shared-user")
            assert two.user_for_key(key) == "shared-user"
            (info,) = two.keys("shared-user")
            two.revoke_key(info.key_id)
            assert one.user_for_key(key) is None
        finally:
            one.remove_user("shared-user")
