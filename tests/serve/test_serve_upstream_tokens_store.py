"""The registry's side of users' OAuth authorizations (issue 58), on SQLite and PostgreSQL:
tokens stored encrypted, named by a grant that makes a changed server config for every replica,
renewed only over what was read, forgotten; flows taken once; rotated with the registry key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from toolroute.serve.secrets import PREFIX, SecretBox
from toolroute.serve.store import UserStore

SERVER = {"url": "http://127.0.0.1:9/mcp", "oauth": {"clientId": "gw", "clientSecret": "client-s3cret"}}
TOKENS = json.dumps({"access_token": "at-secret-1", "refresh_token": "rt-secret-1"})


@pytest.fixture
def store(store: UserStore) -> UserStore:
    """The stage's registry (each backend) with alice and bob, each with the OAuth server."""
    for user in ("alice", "bob"):
        store.add_user(user)
        store.add_server(user, "gh", SERVER)
    return store


def _raw(store: UserStore, table: str, column: str) -> list[str]:
    return [str(row[0]) for row in store._query(f"SELECT {column} FROM {table}")]


def test_tokens_are_stored_encrypted_and_their_grant_changes_the_config(store: UserStore) -> None:
    before, version = store.servers("alice")["gh"], store.servers_version("alice")
    assert "grant" not in before["oauth"] and before["oauth"]["clientSecret"] == "client-s3cret"
    store.put_upstream_tokens("alice", "gh", "g1", TOKENS)
    assert store.upstream_tokens("alice", "gh") == ("g1", TOKENS)
    assert store.upstream_tokens("bob", "gh") is None
    (raw,) = _raw(store, "toolroute_upstream_tokens", "tokens")
    assert raw.startswith(PREFIX) and "at-secret-1" not in raw
    assert all("client-s3cret" not in c for c in _raw(store, "toolroute_user_servers", "config"))
    assert store.servers("alice")["gh"]["oauth"]["grant"] == "g1"
    assert store.servers_version("alice") != version
    listing = store.server_listing("alice")["gh"]["oauth"]
    assert listing == {"clientId": "gw", "clientSecret": "***", "authorized": True}
    assert store.servers("bob")["gh"] == before  # bob's untouched


def test_a_renewal_replaces_only_what_was_read(store: UserStore) -> None:
    store.put_upstream_tokens("alice", "gh", "g1", TOKENS)
    renewed = json.dumps({"access_token": "at-2", "refresh_token": "rt-2"})
    assert store.renew_upstream_tokens("alice", "gh", "g1", TOKENS, renewed)
    # Another replica read the old tokens: its renewal loses, the first one stands.
    assert not store.renew_upstream_tokens("alice", "gh", "g1", TOKENS, json.dumps({"access_token": "at-x"}))
    # A renewal of a grant the user replaced meanwhile writes nothing.
    store.put_upstream_tokens("alice", "gh", "g2", TOKENS)
    assert not store.renew_upstream_tokens("alice", "gh", "g1", TOKENS, renewed)
    assert store.upstream_tokens("alice", "gh") == ("g2", TOKENS)


def test_forget_auth_forgets_one_server_or_all_and_only_that_users(store: UserStore) -> None:
    for user in ("alice", "bob"):
        store.put_upstream_tokens(user, "gh", f"g-{user}", TOKENS)
    assert store.forget_auth("alice", "other") == 0
    assert store.forget_auth("alice", "gh") == 1
    assert store.upstream_tokens("alice", "gh") is None
    assert store.upstream_tokens("bob", "gh") is not None
    assert store.forget_auth("bob") == 1
    # Removing a server (or the user) takes its authorization along.
    store.put_upstream_tokens("alice", "gh", "g3", TOKENS)
    store.remove_server("alice", "gh")
    assert store.upstream_tokens("alice", "gh") is None


def test_a_flow_is_taken_once_and_old_ones_go(store: UserStore) -> None:
    store.add_oauth_flow("d1", "alice", "gh", '{"verifier": "v-secret"}', older=0.0)
    (raw,) = _raw(store, "toolroute_oauth_flows", "flow")
    assert "v-secret" not in raw
    taken = store.take_oauth_flow("d1")
    assert taken is not None and taken[:3] == ("alice", "gh", '{"verifier": "v-secret"}')
    assert store.take_oauth_flow("d1") is None
    assert store.take_oauth_flow("unknown") is None
    store.add_oauth_flow("d2", "alice", "gh", "{}", older=0.0)
    store.add_oauth_flow("d3", "bob", "gh", "{}", older=float("inf"))  # everything older goes
    assert store.take_oauth_flow("d2") is None and store.take_oauth_flow("d3") is not None


def test_rotation_re_encrypts_tokens(tmp_path: Path) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    key_file = tmp_path / "store.key"
    key_file.write_text(old + "\n")
    key_file.chmod(0o600)
    url = f"sqlite:///{tmp_path / 'users.db'}"
    with UserStore(url, SecretBox(key_file)) as store:
        store.add_user("alice")
        store.add_server("alice", "gh", SERVER)
        store.put_upstream_tokens("alice", "gh", "g1", TOKENS)
    key_file.write_text(f"{new}\n{old}\n")
    with UserStore(url, SecretBox(key_file)) as store:
        store.rotate_secrets()
    key_file.write_text(new + "\n")  # the old key dropped: tokens and client secret still read
    with UserStore(url, SecretBox(key_file)) as store:
        assert store.upstream_tokens("alice", "gh") == ("g1", TOKENS)
        assert store.servers("alice")["gh"]["oauth"]["clientSecret"] == "client-s3cret"


def test_a_secret_setting_is_encrypted_and_the_first_writer_wins(store: UserStore) -> None:
    assert store.secret_setting("oauth_client:x") is None
    store.put_secret_setting("oauth_client:x", '{"client_secret": "cs-1"}')
    store.put_secret_setting("oauth_client:x", '{"client_secret": "cs-2"}')  # a replica racing: loses
    assert store.secret_setting("oauth_client:x") == '{"client_secret": "cs-1"}'
    assert all("cs-1" not in v for v in _raw(store, "toolroute_settings", "value"))
    store.forget_setting("oauth_client:x")
    assert store.secret_setting("oauth_client:x") is None
