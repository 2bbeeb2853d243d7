"""Secrets at rest in the user registry: upstream `env` and `headers` values, encrypted.

Each value is stored as `enc:v1:<Fernet token>` (`cryptography`'s Fernet: AES-128-CBC with an
HMAC-SHA256, a timestamp, a random IV). The key comes from, first found:
- `TOOLROUTE_STORE_KEY`: one or more Fernet keys, comma-separated;
- `--store-key-file` / `TOOLROUTE_STORE_KEY_FILE`: a file of keys, one a line;
- the default file `$XDG_CONFIG_HOME/toolroute/store.key` (else `~/.config/...`), made 0600
  with a new key the first time a secret is written.
The first key encrypts; every key decrypts (`MultiFernet`), which is how a key is rotated: put a
new key first, run `toolroute users rotate-key`, then drop the old one (docs/deploy.md).
Replicas that share a registry need the same key file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolroute.errors import ToolArgumentError

PREFIX = "enc:v1:"
KEY_ENV = "TOOLROUTE_STORE_KEY"
KEY_FILE_ENV = "TOOLROUTE_STORE_KEY_FILE"
SECRET_FIELDS = ("env", "headers")
OAUTH_SECRET = "clientSecret"  # a pre-registered OAuth client's secret (`oauth` of a server)


class SecretError(ToolArgumentError):
    """A secret cannot be encrypted or decrypted as asked (no key, wrong key, bad key file)."""


def default_key_file() -> Path:
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "toolroute" / "store.key"


def _fernet() -> Any:
    try:
        from cryptography.fernet import Fernet, MultiFernet
    except ImportError:  # pragma: no cover - cryptography comes with pyjwt[crypto]
        raise SecretError("encrypting registry secrets needs the cryptography package") from None
    return Fernet, MultiFernet


def _private_text(path: Path) -> str:
    """The key file's text, refused when others may read it: whoever can read the key can read
    every secret the registry holds."""
    with path.open(encoding="utf-8") as f:
        mode = os.fstat(f.fileno()).st_mode
        if mode & 0o044:
            raise SecretError(
                f"the registry key file {path} is readable by its group or by others (mode {mode & 0o777:o}): "
                f"'chmod 600 {path}'"
            )
        return f.read()


class SecretBox:
    """Encrypts and decrypts the secret values of server configs with the operator's key(s)."""

    def __init__(self, key_file: str | os.PathLike[str] | None = None) -> None:
        self._explicit_file = Path(key_file).expanduser() if key_file else None
        self._box: Any = None

    @property
    def key_file(self) -> Path | None:
        """The file the keys come from (None when they come from $TOOLROUTE_STORE_KEY)."""
        if os.environ.get(KEY_ENV):
            return None
        if self._explicit_file is not None:
            return self._explicit_file
        if os.environ.get(KEY_FILE_ENV):
            return Path(os.environ[KEY_FILE_ENV]).expanduser()
        return default_key_file()

    def _keys(self, *, create: bool) -> list[bytes] | None:
        if os.environ.get(KEY_ENV):
            return [k.strip().encode() for k in os.environ[KEY_ENV].split(",") if k.strip()]
        path = self.key_file
        assert path is not None
        try:
            text = _private_text(path)
        except FileNotFoundError:
            if path != default_key_file():
                raise SecretError(f"the registry key file {path} does not exist") from None
            return [self._create_default(path)] if create else None
        except OSError as exc:
            raise SecretError(f"cannot read the registry key file {path}: {exc}") from None
        return [line.strip().encode() for line in text.splitlines() if line.strip()]

    @staticmethod
    def _create_default(path: Path) -> bytes:
        fernet, _ = _fernet()
        key: bytes = fernet.generate_key()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return _private_text(path).splitlines()[0].strip().encode()
        with os.fdopen(fd, "wb") as out:
            out.write(key + b"\n")
            out.flush()
            os.fsync(out.fileno())
        return key

    def _multi(self, *, create: bool) -> Any:
        if self._box is None:
            keys = self._keys(create=create)
            if not keys:
                if not create:
                    return None
                raise SecretError(f"no key in the registry key file {self.key_file}")
            fernet, multi = _fernet()
            try:
                self._box = multi([fernet(k) for k in keys])
            except (ValueError, TypeError) as exc:
                raise SecretError(f"a registry key is not a Fernet key ({exc})") from None
        return self._box

    def encrypt(self, value: str) -> str:
        if value.startswith(PREFIX):
            return value
        token: bytes = self._multi(create=True).encrypt(value.encode())
        return PREFIX + token.decode()

    def decrypt(self, value: str) -> str:
        if not value.startswith(PREFIX):
            return value
        box = self._multi(create=False)
        if box is None:
            raise SecretError(
                "the registry holds encrypted secrets but no key was found: set --store-key-file, "
                f"${KEY_FILE_ENV} or ${KEY_ENV} to the key that wrote them"
            )
        from cryptography.fernet import InvalidToken

        try:
            return str(box.decrypt(value.removeprefix(PREFIX).encode()).decode())
        except InvalidToken:
            raise SecretError("a registry secret does not decrypt with the configured key(s)") from None

    def rotate(self, value: str) -> str:
        """`value` encrypted again under the first key (plain values get encrypted)."""
        if not value.startswith(PREFIX):
            return self.encrypt(value)
        from cryptography.fernet import InvalidToken

        box = self._multi(create=False)
        if box is None:
            raise SecretError("the registry holds encrypted secrets but no key was found to rotate them with")
        try:
            token: bytes = box.rotate(value.removeprefix(PREFIX).encode())
        except InvalidToken:
            raise SecretError("a registry secret does not decrypt with the configured key(s)") from None
        return PREFIX + token.decode()

    def seal(self, config: Mapping[str, Any], how: str = "encrypt") -> dict[str, Any]:
        """`config` with every `env` and `headers` value passed through `how` (a method name)."""
        change = getattr(self, how)
        out = dict(config)
        for field in SECRET_FIELDS:
            values = out.get(field)
            if isinstance(values, Mapping):
                out[field] = {name: change(str(v)) if isinstance(v, str) else v for name, v in values.items()}
        oauth = out.get("oauth")
        if isinstance(oauth, Mapping) and isinstance(oauth.get(OAUTH_SECRET), str):
            out["oauth"] = {**oauth, OAUTH_SECRET: change(oauth[OAUTH_SECRET])}
        return out
