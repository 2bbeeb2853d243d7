"""The user registry: the same behaviour on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import secrets
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from toolroute.errors import ToolArgumentError
from toolroute.serve.secrets import PREFIX, SecretBox, SecretError
from toolroute.serve.store import REDACTED, UserStore, key_digest

SERVER = {"command": "python3", "args": ["server.py"], "env": {"API_TOKEN": "s3cret-value"}}


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


def test_a_users_attributes_round_trip_and_go_with_the_user(store: UserStore) -> None:
    store.add_user("ann")
    store.add_user("ben")
    assert store.attributes("ann") == {}
    store.set_attributes("ann", {"roles": ["admin"], "team": "ops"})
    store.set_attributes("ann", {"roles": ["dev"]})  # replaced whole, not merged
    assert store.attributes("ann") == {"roles": ["dev"]}
    assert store.attributes("ben") == {}  # one user's attributes are never another's
    with pytest.raises(ToolArgumentError, match="no user"):
        store.set_attributes("nobody", {"roles": ["admin"]})
    with pytest.raises(ToolArgumentError, match="JSON object"):
        store.set_attributes("ann", ["admin"])  # type: ignore[arg-type]
    store.remove_user("ann")
    store.add_user("ann")  # a new user of the same id starts with none
    assert store.attributes("ann") == {}


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


# ---- secrets at rest ------------------------------------------------------------------------


def _raw_configs(store: UserStore) -> str:
    """The stored server configs exactly as the database holds them."""
    return "\n".join(str(row[0]) for row in store._query("SELECT config FROM toolroute_user_servers"))


def test_secret_values_are_stored_encrypted_and_read_back_whole(store: UserStore) -> None:
    store.add_user("alice")
    store.add_server("alice", "notes", {**SERVER, "headers": {"Authorization": "Bearer tok-9f2"}})
    raw = _raw_configs(store)
    assert "s3cret-value" not in raw and "tok-9f2" not in raw
    assert "API_TOKEN" in raw and raw.count(PREFIX) == 2
    config = store.servers("alice")["notes"]
    assert config["env"] == {"API_TOKEN": "s3cret-value"}
    assert config["headers"] == {"Authorization": "Bearer tok-9f2"}


def test_the_sqlite_files_hold_no_secret_byte_and_only_their_owner_may_read_them(tmp_path: Path) -> None:
    path = tmp_path / "users.db"
    with UserStore(f"sqlite:///{path}") as store:
        store.add_user("alice")
        store.add_server("alice", "notes", SERVER)
        files = [p for p in tmp_path.iterdir() if p.name.startswith("users.db")]
        assert all(b"s3cret-value" not in p.read_bytes() for p in files)
        assert all(p.stat().st_mode & 0o077 == 0 for p in files), [oct(p.stat().st_mode) for p in files]


def test_rotation_moves_every_secret_to_the_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    key_file = tmp_path / "store.key"
    key_file.write_text(old + "\n")
    key_file.chmod(0o600)
    url = f"sqlite:///{tmp_path / 'users.db'}"
    with UserStore(url, SecretBox(key_file)) as store:
        store.add_user("alice")
        store.add_server("alice", "notes", SERVER)
    key_file.write_text(f"{new}\n{old}\n")  # the new key first, the old one still accepted
    with UserStore(url, SecretBox(key_file)) as store:
        assert store.rotate_secrets() == 1
    key_file.write_text(new + "\n")  # the old key dropped
    with UserStore(url, SecretBox(key_file)) as store:
        assert store.servers("alice")["notes"]["env"] == {"API_TOKEN": "s3cret-value"}
    key_file.write_text(old + "\n")  # only the retired key: a clear error, not garbage
    with UserStore(url, SecretBox(key_file)) as store, pytest.raises(SecretError, match="does not decrypt"):
        store.servers("alice")


def test_a_missing_key_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'users.db'}"
    with UserStore(url) as store:
        store.add_user("alice")
        store.add_server("alice", "notes", SERVER)
    with pytest.raises(SecretError, match="does not exist"):
        UserStore(url, SecretBox(tmp_path / "nowhere.key")).servers("alice")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "elsewhere"))  # the default file is not there
    with UserStore(url) as store, pytest.raises(SecretError, match="no key was found"):
        store.servers("alice")


# ---- replicas start together -----------------------------------------------------------------

STARTER = r"""
import sys, time
from toolroute.serve.store import UserStore
at = float(sys.argv[2])
time.sleep(max(0.0, at - time.time()))
with UserStore(sys.argv[1]) as store:
    assert store.schema_version >= 1
"""


def test_ten_replicas_opening_a_fresh_postgres_registry_at_once_all_start(postgres_dsn: str) -> None:
    import psycopg

    for round_ in range(3):
        name = f"fresh_{round_}_{secrets.token_hex(4)}"
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        dsn = postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
        at = time.time() + 3.0  # every starter opens the registry at this moment
        starters = [
            subprocess.Popen([sys.executable, "-c", STARTER, dsn, str(at)], stderr=subprocess.PIPE, text=True)
            for _ in range(10)
        ]
        failures = []
        for proc in starters:
            _, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failures.append(err.strip().splitlines()[-1] if err.strip() else str(proc.returncode))
        assert failures == [], failures
        with UserStore(dsn) as store:
            rows = store._query("SELECT version FROM toolroute_schema")
            assert sorted(r[0] for r in rows) == list(range(1, store.schema_version + 1))


def test_a_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    """Whoever reads the key reads every secret in the registry: a key file with group or other
    read permission is refused, naming the fix."""
    key_file = tmp_path / "store.key"
    key_file.write_text(Fernet.generate_key().decode() + "\n")
    key_file.chmod(0o644)
    url = f"sqlite:///{tmp_path / 'users.db'}"
    with UserStore(url, SecretBox(key_file)) as store:
        store.add_user("alice")
        with pytest.raises(SecretError, match="chmod 600"):
            store.add_server("alice", "notes", SERVER)
    key_file.chmod(0o600)
    with UserStore(url, SecretBox(key_file)) as store:
        store.add_server("alice", "notes", SERVER)
        assert store.servers("alice")["notes"]["env"] == {"API_TOKEN": "s3cret-value"}


REPLACER = """
import json, sys
from toolroute.serve.secrets import SecretBox
from toolroute.serve.store import UserStore
url, key_file, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
with UserStore(url, SecretBox(key_file)) as store:
    for n in range(rounds):
        config = {"command": "python3", "args": ["server.py"], "env": {"API_TOKEN": f"rotated-{n}"}}
        store.add_server("alice", "notes", config, replace=True)
print("done", flush=True)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_rotation_never_reverts_a_credential_replaced_meanwhile(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`users rotate-key` on one replica while another replaces a user's leaked credential
    (`servers add --replace`): the rotation read every row and wrote back what it had read, so
    the new credential could be reverted to the old, leaked one. Each row is now written back
    only if it still holds what was read."""
    url = f"sqlite:///{tmp_path / 'users.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_dsn")
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    key_file = tmp_path / "store.key"
    key_file.write_text(f"{new}\n{old}\n")
    key_file.chmod(0o600)
    rounds = 150
    with UserStore(url, SecretBox(key_file)) as store:
        for user in store.users():
            store.remove_user(user)
        store.add_user("alice")
        store.add_server("alice", "notes", SERVER)
        replacer = subprocess.Popen(
            [sys.executable, "-c", REPLACER, url, str(key_file), str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        rotations = 0
        try:
            deadline = time.monotonic() + 120
            while replacer.poll() is None and time.monotonic() < deadline:
                store.rotate_secrets()
                rotations += 1
            out, err = replacer.communicate(timeout=60)
        finally:
            if replacer.poll() is None:
                replacer.kill()
                replacer.wait()
        assert out.strip() == "done", err[-2000:]
        assert rotations > 0
        # The replacer's last credential stands, whatever the rotations in between did.
        assert store.servers("alice")["notes"]["env"] == {"API_TOKEN": f"rotated-{rounds - 1}"}
        store.rotate_secrets()
        assert store.servers("alice")["notes"]["env"] == {"API_TOKEN": f"rotated-{rounds - 1}"}
        store.remove_user("alice")
