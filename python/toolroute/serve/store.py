"""The user registry of served mode: users, their API keys (hashed) and their own MCP servers.

One schema and one set of migrations for both back ends: SQLite (embedded, the default) and
PostgreSQL (psycopg 3), which several replicas share. Only this module speaks SQL; the two back
ends differ in the connection and the parameter style alone.

API keys look like `trk_<key id>_<secret>`: the key id finds the row, and only a SHA-256 digest
of the whole key is stored (a key is 32 random bytes, so a slow hash adds nothing), compared in
constant time. Server configs may hold secrets (`env`, `headers`): their values are stored
encrypted (`secrets.py`) and listings redact them.

Migrations run under a lock, so replicas that open a fresh registry at the same moment apply
them once: PostgreSQL's transaction-scoped advisory lock, SQLite's write lock (`BEGIN IMMEDIATE`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from toolroute.errors import ToolArgumentError, ToolRegistrationError
from toolroute.naming import UserId, service_id_problem
from toolroute.serve.secrets import SecretBox

KEY_PREFIX = "trk"
_KEY_RE = re.compile(r"^trk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
REDACTED = "***"
# pg_advisory_xact_lock's key for migrations: any constant that other users of the database
# are unlikely to pick ("toolrout" in ASCII).
MIGRATION_LOCK = 0x746F6F6C726F7574
# How often a rotation re-reads a config that changed between its read and its write.
ROTATE_TRIES = 20

# Each entry moves the schema one version up; a database records the versions it has applied.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE IF NOT EXISTS toolroute_users ( user_id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS toolroute_api_keys ("
        " key_id TEXT PRIMARY KEY,"
        " user_id TEXT NOT NULL REFERENCES toolroute_users(user_id) ON DELETE CASCADE,"
        " digest TEXT NOT NULL,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " revoked_at DOUBLE PRECISION)",
        "CREATE TABLE IF NOT EXISTS toolroute_user_servers ("
        " user_id TEXT NOT NULL REFERENCES toolroute_users(user_id) ON DELETE CASCADE,"
        " server_id TEXT NOT NULL,"
        " config TEXT NOT NULL,"
        " PRIMARY KEY (user_id, server_id))",
    ),
    # What one deployment keeps of its own (the secret tenant uids are derived with).
    ("CREATE TABLE IF NOT EXISTS toolroute_settings ( name TEXT PRIMARY KEY, value TEXT NOT NULL)",),
    # A user's attributes (a JSON object): what a policy's `user.claims` are for an API-key user.
    (
        "CREATE TABLE IF NOT EXISTS toolroute_user_attributes ("
        " user_id TEXT PRIMARY KEY REFERENCES toolroute_users(user_id) ON DELETE CASCADE,"
        " attributes TEXT NOT NULL)",
    ),
    # A user's OAuth authorization of their own servers (the tokens, one encrypted JSON value;
    # `grant_id` names one authorization, so replicas see a new or forgotten one), and the
    # authorization flows in progress, by a digest of their `state` (upstream_oauth/).
    (
        "CREATE TABLE IF NOT EXISTS toolroute_upstream_tokens ("
        " user_id TEXT NOT NULL REFERENCES toolroute_users(user_id) ON DELETE CASCADE,"
        " server_id TEXT NOT NULL,"
        " grant_id TEXT NOT NULL,"
        " tokens TEXT NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL,"
        " PRIMARY KEY (user_id, server_id))",
        "CREATE TABLE IF NOT EXISTS toolroute_oauth_flows ("
        " state_digest TEXT PRIMARY KEY,"
        " user_id TEXT NOT NULL REFERENCES toolroute_users(user_id) ON DELETE CASCADE,"
        " server_id TEXT NOT NULL,"
        " flow TEXT NOT NULL,"
        " created_at DOUBLE PRECISION NOT NULL)",
    ),
)
UID_SECRET = "uid_secret"


class StoreError(ToolArgumentError):
    """A registry operation that cannot be done as asked (unknown user, duplicate, bad id)."""


@dataclass(frozen=True)
class ApiKeyInfo:
    key_id: str
    user_id: str
    created_at: float
    revoked_at: float | None


class _Backend(Protocol):
    placeholder: str
    begin_exclusive: str  # starts a transaction that holds off other migrators
    begin_write: str  # starts a transaction that writes (after reading what it checks)
    lock_rows: str  # appended to a SELECT whose rows the transaction then writes

    def connect(self) -> Any: ...

    def files(self) -> list[Path]: ...


class _Sqlite:
    placeholder = "?"
    begin_exclusive = "BEGIN IMMEDIATE"
    # The write lock from the start: a deferred transaction that reads, then writes, fails at
    # once ("database is locked") when another process writes meanwhile, instead of waiting.
    begin_write = "BEGIN IMMEDIATE"
    lock_rows = ""  # the write lock is the database's: rows read are held already

    def __init__(self, path: Path) -> None:
        self.path = path

    def connect(self) -> Any:
        # Readable by the server's user alone (SQLite gives its -wal and -shm files the same mode).
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    def files(self) -> list[Path]:
        return [self.path, *(self.path.with_name(self.path.name + end) for end in ("-wal", "-shm", "-journal"))]


class _Postgres:
    placeholder = "%s"
    begin_exclusive = f"BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"
    begin_write = "BEGIN"
    lock_rows = " FOR UPDATE"  # rows read in a write transaction, held until it ends

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError("a PostgreSQL store needs psycopg 3: pip install 'toolroute[postgres]'") from None
        return psycopg.connect(self.dsn, autocommit=True)

    def files(self) -> list[Path]:
        """The folders of the unix sockets this DSN reaches the server through (whoever may
        connect there may be the registry's owner: peer or trust authentication), so that no
        command's view shows them; none over TCP."""
        from psycopg.conninfo import conninfo_to_dict

        hosts = str(conninfo_to_dict(self.dsn).get("host") or "")
        if not hosts:  # libpq's default: the socket folder Debian's PostgreSQL uses
            return [Path("/var/run/postgresql"), Path("/run/postgresql")]
        return [Path(h) for h in hosts.split(",") if h.startswith("/")]


def _backend(url: str) -> _Backend:
    if url.startswith(("postgresql://", "postgres://")):
        return _Postgres(url)
    if url.startswith("sqlite:///"):
        return _Sqlite(Path(url.removeprefix("sqlite:///")).expanduser())
    if "://" in url:
        raise StoreError(f"unknown store URL {url!r}: use sqlite:///PATH or postgresql://...")
    return _Sqlite(Path(url).expanduser())


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """A server config with every `env` and `headers` value hidden (the names stay visible)."""
    shown = dict(config)
    for field in ("env", "headers"):
        values = shown.get(field)
        if isinstance(values, Mapping):
            shown[field] = {name: REDACTED for name in values}
    oauth = shown.get("oauth")
    if isinstance(oauth, Mapping):
        shown["oauth"] = {k: REDACTED if k == "clientSecret" else v for k, v in oauth.items() if k != "grant"}
        shown["oauth"]["authorized"] = "grant" in oauth
    return shown


class UserStore:
    """Users, API keys and per-user MCP servers in SQLite or PostgreSQL. Thread-safe."""

    def __init__(self, url: str, secrets: SecretBox | None = None) -> None:
        self.url = url
        self.secrets = secrets or SecretBox()
        self._backend = _backend(url)
        self._lock = threading.Lock()
        # Bumped by every change made through this object, so caches over it (Tenancy's doors)
        # see this process's own changes at once; other processes' changes need their TTL.
        self.generation = 0
        self._conn = self._backend.connect()
        self._migrate()

    # ---- plumbing ------------------------------------------------------------------------

    def _sql(self, statement: str) -> str:
        return statement.replace("?", self._backend.placeholder)

    @contextmanager
    def _transaction(self, begin: str | None = None) -> Iterator[Any]:
        with self._lock:
            cur = self._conn.cursor()
            for statement in (begin or self._backend.begin_write).split("; "):
                cur.execute(statement)
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
            self.generation += 1

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            cur = self._conn.cursor()
            cur.execute(self._sql(statement), tuple(params))
            return list(cur.fetchall())

    def _migrate(self) -> None:
        with self._transaction(self._backend.begin_exclusive) as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS toolroute_schema (version INTEGER PRIMARY KEY)")
            cur.execute("SELECT version FROM toolroute_schema")
            applied = {row[0] for row in cur.fetchall()}
            for version, statements in enumerate(MIGRATIONS, start=1):
                if version in applied:
                    continue
                for statement in statements:
                    cur.execute(statement)
                cur.execute(self._sql("INSERT INTO toolroute_schema (version) VALUES (?)"), (version,))

    @property
    def schema_version(self) -> int:
        rows = self._query("SELECT MAX(version) FROM toolroute_schema")
        return int(rows[0][0] or 0)

    def secret_files(self) -> list[Path]:
        """The files that hold the registry or its key: never to be inside a command's view."""
        key = self.secrets.key_file
        return [*self._backend.files(), *([key] if key is not None else [])]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> UserStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the deployment's own -------------------------------------------------------------

    def deployment_secret(self) -> bytes:
        """The secret this deployment's tenant uids are derived with (`identities.py`): made
        once, at random, by whichever replica asks first; every replica on this registry reads
        the same, and another registry (another deployment) has another."""
        select = "SELECT value FROM toolroute_settings WHERE name = ?"
        rows = self._query(select, (UID_SECRET,))
        if not rows:
            with self._transaction() as cur:
                cur.execute(
                    self._sql("INSERT INTO toolroute_settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING"),
                    (UID_SECRET, secrets.token_hex(32)),
                )
            rows = self._query(select, (UID_SECRET,))
        return bytes.fromhex(str(rows[0][0]))

    def secret_setting(self, name: str) -> str | None:
        """A setting stored encrypted (an OAuth client registration), decrypted; None if unset."""
        rows = self._query("SELECT value FROM toolroute_settings WHERE name = ?", (name,))
        return self.secrets.decrypt(str(rows[0][0])) if rows else None

    def put_secret_setting(self, name: str, value: str) -> None:
        """Set a setting, encrypted; the first writer wins (replicas registering at once agree)."""
        with self._transaction() as cur:
            cur.execute(
                self._sql("INSERT INTO toolroute_settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING"),
                (name, self.secrets.encrypt(value)),
            )

    def forget_setting(self, name: str) -> None:
        with self._transaction() as cur:
            cur.execute(self._sql("DELETE FROM toolroute_settings WHERE name = ?"), (name,))

    # ---- users ---------------------------------------------------------------------------

    def add_user(self, user_id: str) -> None:
        user_id = UserId.of(user_id)  # an administrator's door: the id is checked here
        with self._transaction() as cur:
            cur.execute(self._sql("SELECT 1 FROM toolroute_users WHERE user_id = ?"), (user_id,))
            if cur.fetchall():
                raise StoreError(f"user {user_id!r} already exists")
            cur.execute(
                self._sql("INSERT INTO toolroute_users (user_id, created_at) VALUES (?, ?)"), (user_id, time.time())
            )

    def remove_user(self, user_id: str) -> None:
        """Remove a user with their keys and servers."""
        with self._transaction() as cur:
            # Explicit deletes: SQLite connections made elsewhere may not enforce foreign keys.
            cur.execute(self._sql("DELETE FROM toolroute_api_keys WHERE user_id = ?"), (user_id,))
            cur.execute(self._sql("DELETE FROM toolroute_user_servers WHERE user_id = ?"), (user_id,))
            cur.execute(self._sql("DELETE FROM toolroute_user_attributes WHERE user_id = ?"), (user_id,))
            cur.execute(self._sql("DELETE FROM toolroute_upstream_tokens WHERE user_id = ?"), (user_id,))
            cur.execute(self._sql("DELETE FROM toolroute_oauth_flows WHERE user_id = ?"), (user_id,))
            cur.execute(self._sql("DELETE FROM toolroute_users WHERE user_id = ?"), (user_id,))
            if cur.rowcount == 0:
                raise StoreError(f"no user {user_id!r}")

    def users(self) -> list[str]:
        return [row[0] for row in self._query("SELECT user_id FROM toolroute_users ORDER BY user_id")]

    def _require_user(self, cur: Any, user_id: str) -> None:
        cur.execute(self._sql("SELECT 1 FROM toolroute_users WHERE user_id = ?"), (user_id,))
        if not cur.fetchall():
            raise StoreError(f"no user {user_id!r}")

    def set_attributes(self, user_id: str, attributes: Mapping[str, Any]) -> None:
        """Replace `user_id`'s attributes (a JSON object; an operator's policy reads them as
        `user.claims` of the user's API-key requests)."""
        if not isinstance(attributes, Mapping):
            raise StoreError("a user's attributes are a JSON object")
        text = json.dumps(dict(attributes), sort_keys=True)
        with self._transaction() as cur:
            self._require_user(cur, user_id)
            cur.execute(self._sql("DELETE FROM toolroute_user_attributes WHERE user_id = ?"), (user_id,))
            cur.execute(
                self._sql("INSERT INTO toolroute_user_attributes (user_id, attributes) VALUES (?, ?)"),
                (user_id, text),
            )

    def attributes(self, user_id: str) -> dict[str, Any]:
        rows = self._query("SELECT attributes FROM toolroute_user_attributes WHERE user_id = ?", (user_id,))
        value = json.loads(rows[0][0]) if rows else {}
        return value if isinstance(value, dict) else {}

    # ---- API keys ------------------------------------------------------------------------

    def add_key(self, user_id: str) -> str:
        """A new API key for `user_id`; the only time the key itself is ever available."""
        key_id = secrets.token_hex(8)
        key = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        with self._transaction() as cur:
            self._require_user(cur, user_id)
            cur.execute(
                self._sql("INSERT INTO toolroute_api_keys (key_id, user_id, digest, created_at) VALUES (?, ?, ?, ?)"),
                (key_id, user_id, key_digest(key), time.time()),
            )
        return key

    def revoke_key(self, key_id: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                self._sql("UPDATE toolroute_api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL"),
                (time.time(), key_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"no active API key {key_id!r}")

    def keys(self, user_id: str | None = None) -> list[ApiKeyInfo]:
        statement = "SELECT key_id, user_id, created_at, revoked_at FROM toolroute_api_keys"
        params: tuple[Any, ...] = ()
        if user_id is not None:
            statement += " WHERE user_id = ?"
            params = (user_id,)
        rows = self._query(statement + " ORDER BY created_at, key_id", params)
        return [ApiKeyInfo(r[0], r[1], float(r[2]), None if r[3] is None else float(r[3])) for r in rows]

    def user_for_key(self, key: str) -> str | None:
        """The owner of an active key, or None (unknown, revoked or malformed)."""
        match = _KEY_RE.match(key)
        if match is None:
            return None
        rows = self._query(
            "SELECT user_id, digest FROM toolroute_api_keys WHERE key_id = ? AND revoked_at IS NULL",
            (match.group(1),),
        )
        if not rows:
            return None
        user_id, digest = rows[0]
        return str(user_id) if hmac.compare_digest(str(digest), key_digest(key)) else None

    # ---- per-user MCP servers --------------------------------------------------------------

    def add_server(self, user_id: str, server_id: str, config: Mapping[str, Any], *, replace: bool = False) -> None:
        """Store one `mcpServers` entry for a user (validated by the gateway's own parser)."""
        from toolroute.mcp.config import parse_server  # the mcp package stays optional until used

        problem = service_id_problem(server_id)
        if problem is not None:
            raise StoreError(problem)
        try:
            parse_server(server_id, config)
        except ToolRegistrationError as exc:
            raise StoreError(str(exc)) from None
        text = json.dumps(self.secrets.seal(config), sort_keys=True)
        with self._transaction() as cur:
            self._require_user(cur, user_id)
            cur.execute(
                self._sql("SELECT 1 FROM toolroute_user_servers WHERE user_id = ? AND server_id = ?"),
                (user_id, server_id),
            )
            exists = bool(cur.fetchall())
            if exists and not replace:
                raise StoreError(f"user {user_id!r} already has a server {server_id!r}")
            if exists:
                cur.execute(
                    self._sql("UPDATE toolroute_user_servers SET config = ? WHERE user_id = ? AND server_id = ?"),
                    (text, user_id, server_id),
                )
            else:
                cur.execute(
                    self._sql("INSERT INTO toolroute_user_servers (user_id, server_id, config) VALUES (?, ?, ?)"),
                    (user_id, server_id, text),
                )

    def remove_server(self, user_id: str, server_id: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                self._sql("DELETE FROM toolroute_user_servers WHERE user_id = ? AND server_id = ?"),
                (user_id, server_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"user {user_id!r} has no server {server_id!r}")
            cur.execute(
                self._sql("DELETE FROM toolroute_upstream_tokens WHERE user_id = ? AND server_id = ?"),
                (user_id, server_id),
            )

    def servers_version(self, user_id: str) -> str:
        """What a user's stored server configs are now, as a digest of the rows (nothing
        decrypted): a replica compares it per request to see another replica's change."""
        rows = self._stored_rows(user_id)
        return hashlib.sha256(json.dumps([list(row) for row in rows]).encode()).hexdigest()

    def servers(self, user_id: str) -> dict[str, dict[str, Any]]:
        """A user's server configs, secrets included: for the gateway, never for display. A
        server the user authorizes with OAuth has its present authorization's id in
        `oauth.grant` (none yet: no `grant`), so a new or forgotten one is a changed config."""
        return {sid: self.secrets.seal(cfg, "decrypt") for sid, cfg in self._server_rows(user_id)}

    def _server_rows(self, user_id: str) -> list[tuple[str, dict[str, Any]]]:
        """A user's server configs as stored (secrets still encrypted), with their grants."""
        rows = []
        for sid, text, grant in self._stored_rows(user_id):
            config = json.loads(text)
            if isinstance(config.get("oauth"), Mapping):
                config["oauth"] = {k: v for k, v in config["oauth"].items() if k != "grant"}
                if grant is not None:
                    config["oauth"]["grant"] = str(grant)
            rows.append((str(sid), config))
        return rows

    def _stored_rows(self, user_id: str) -> list[tuple[Any, ...]]:
        """A user's (server id, config text, OAuth grant id or None) rows, by server id."""
        return self._query(
            "SELECT s.server_id, s.config, t.grant_id FROM toolroute_user_servers s"
            " LEFT JOIN toolroute_upstream_tokens t ON t.user_id = s.user_id AND t.server_id = s.server_id"
            " WHERE s.user_id = ? ORDER BY s.server_id",
            (user_id,),
        )

    def rotate_secrets(self) -> int:
        """Encrypt every stored secret again under the first key (plain ones, from a registry
        older than encryption, get encrypted); the number of server configs rewritten.

        Each row is read locked (PostgreSQL's FOR UPDATE; SQLite's write lock) and written back
        only if it still holds what was read: a config replaced meanwhile (`servers add
        --replace` on another replica, a new key for a leaked one) is read again and
        re-encrypted, never reverted to the value read before."""
        rows = self._query("SELECT user_id, server_id FROM toolroute_user_servers")
        rewritten = 0
        for user_id, server_id in rows:
            rewritten += self._rotate_row(user_id, server_id)
        # Users' OAuth tokens too (not counted: they are no server config), the same way.
        for user_id, server_id in self._query("SELECT user_id, server_id FROM toolroute_upstream_tokens"):
            self._rotate_tokens(user_id, server_id)
        return rewritten

    def _rotate_tokens(self, user_id: str, server_id: str) -> None:
        for _ in range(ROTATE_TRIES):
            with self._transaction() as cur:
                read_row = "SELECT tokens FROM toolroute_upstream_tokens WHERE user_id = ? AND server_id = ?"
                cur.execute(self._sql(read_row) + self._backend.lock_rows, (user_id, server_id))
                found = cur.fetchall()
                if not found:
                    return
                read = str(found[0][0])
                write_row = "UPDATE toolroute_upstream_tokens SET tokens = ? WHERE user_id = ? AND server_id = ?"
                cur.execute(
                    self._sql(write_row + " AND tokens = ?"), (self.secrets.rotate(read), user_id, server_id, read)
                )
                if cur.rowcount == 1:
                    return
        raise StoreError(f"the OAuth tokens of {user_id!r}/{server_id!r} kept changing while they were rotated")

    def _rotate_row(self, user_id: str, server_id: str) -> int:
        """Re-encrypt one config, retrying while others change it under us; 0 if it is gone."""
        for _ in range(ROTATE_TRIES):
            with self._transaction() as cur:
                read_row = "SELECT config FROM toolroute_user_servers WHERE user_id = ? AND server_id = ?"
                cur.execute(self._sql(read_row) + self._backend.lock_rows, (user_id, server_id))
                found = cur.fetchall()
                if not found:
                    return 0  # removed meanwhile: nothing to rotate
                read = found[0][0]
                text = json.dumps(self.secrets.seal(json.loads(read), "rotate"), sort_keys=True)
                write_row = "UPDATE toolroute_user_servers SET config = ? WHERE user_id = ? AND server_id = ?"
                cur.execute(self._sql(write_row + " AND config = ?"), (text, user_id, server_id, read))
                if cur.rowcount == 1:
                    return 1
        raise StoreError(f"the config of {user_id!r}/{server_id!r} kept changing while its secrets were rotated")

    def server_listing(self, user_id: str) -> dict[str, dict[str, Any]]:
        """The same configs with `env` and `headers` values redacted, for people to read."""
        return {sid: redact(cfg) for sid, cfg in self._server_rows(user_id)}

    # ---- users' OAuth authorizations of their own servers (upstream_oauth/) -------------------

    def upstream_tokens(self, user_id: str, server_id: str) -> tuple[str, str] | None:
        """(grant id, the tokens' JSON text, decrypted) of a user's authorization of a server."""
        rows = self._query(
            "SELECT grant_id, tokens FROM toolroute_upstream_tokens WHERE user_id = ? AND server_id = ?",
            (user_id, server_id),
        )
        return (str(rows[0][0]), self.secrets.decrypt(str(rows[0][1]))) if rows else None

    def put_upstream_tokens(self, user_id: str, server_id: str, grant_id: str, tokens: str) -> None:
        """Store a new authorization (replacing any): `tokens` is encrypted here."""
        sealed = self.secrets.encrypt(tokens)
        with self._transaction() as cur:
            self._require_user(cur, user_id)
            where = " WHERE user_id = ? AND server_id = ?"
            cur.execute(self._sql("DELETE FROM toolroute_upstream_tokens" + where), (user_id, server_id))
            cur.execute(
                self._sql(
                    "INSERT INTO toolroute_upstream_tokens (user_id, server_id, grant_id, tokens, updated_at)"
                    " VALUES (?, ?, ?, ?, ?)"
                ),
                (user_id, server_id, grant_id, sealed, time.time()),
            )

    def renew_upstream_tokens(self, user_id: str, server_id: str, grant_id: str, read: str, tokens: str) -> bool:
        """Replace refreshed tokens, only if the row still holds `read` (decrypted) under
        `grant_id`: False when another replica refreshed or the user authorized anew meanwhile."""
        sealed = self.secrets.encrypt(tokens)
        with self._transaction() as cur:
            select = "SELECT tokens FROM toolroute_upstream_tokens WHERE user_id = ? AND server_id = ? AND grant_id = ?"
            cur.execute(self._sql(select) + self._backend.lock_rows, (user_id, server_id, grant_id))
            found = cur.fetchall()
            if not found or self.secrets.decrypt(str(found[0][0])) != read:
                return False
            cur.execute(
                self._sql(
                    "UPDATE toolroute_upstream_tokens SET tokens = ?, updated_at = ?"
                    " WHERE user_id = ? AND server_id = ? AND grant_id = ?"
                ),
                (sealed, time.time(), user_id, server_id, grant_id),
            )
            return True

    def forget_auth(self, user_id: str, server_id: str | None = None) -> int:
        """Forget a user's OAuth authorization of one of their servers (None: of every one):
        the next call asks the user again (`toolroute users servers forget-auth`)."""
        return self.forget_upstream_tokens(user_id, server_id)

    def forget_upstream_tokens(self, user_id: str, server_id: str | None = None, grant_id: str | None = None) -> int:
        """Forget a user's authorization of one server (None: of all), or only the grant
        `grant_id`; the number forgotten."""
        statement, params = "DELETE FROM toolroute_upstream_tokens WHERE user_id = ?", [user_id]
        if server_id is not None:
            statement, params = statement + " AND server_id = ?", [*params, server_id]
        if grant_id is not None:
            statement, params = statement + " AND grant_id = ?", [*params, grant_id]
        with self._transaction() as cur:
            cur.execute(self._sql(statement), tuple(params))
            return int(cur.rowcount)

    def add_oauth_flow(self, state_digest: str, user_id: str, server_id: str, flow: str, older: float) -> None:
        """Record a flow in progress (`flow` encrypted here); flows begun before `older` go."""
        sealed = self.secrets.encrypt(flow)
        with self._transaction() as cur:
            self._require_user(cur, user_id)
            cur.execute(self._sql("DELETE FROM toolroute_oauth_flows WHERE created_at < ?"), (older,))
            cur.execute(
                self._sql(
                    "INSERT INTO toolroute_oauth_flows (state_digest, user_id, server_id, flow, created_at)"
                    " VALUES (?, ?, ?, ?, ?)"
                ),
                (state_digest, user_id, server_id, sealed, time.time()),
            )

    def take_oauth_flow(self, state_digest: str) -> tuple[str, str, str, float] | None:
        """The flow of that state, removed (a state is used once): (user, server, flow JSON
        decrypted, begun at), or None when there is none (unknown, or taken already)."""
        with self._transaction() as cur:
            select = "SELECT user_id, server_id, flow, created_at FROM toolroute_oauth_flows WHERE state_digest = ?"
            cur.execute(self._sql(select) + self._backend.lock_rows, (state_digest,))
            found = cur.fetchall()
            if not found:
                return None
            cur.execute(self._sql("DELETE FROM toolroute_oauth_flows WHERE state_digest = ?"), (state_digest,))
            if cur.rowcount != 1:
                return None
        user_id, server_id, flow, created_at = found[0]
        return str(user_id), str(server_id), self.secrets.decrypt(str(flow)), float(created_at)
