"""`toolroute users`: manage served mode's user registry (users, API keys, users' own MCP servers).

Secrets never reach the terminal except a new API key, printed once when it is made: listings
show key ids and redacted server configs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from toolroute.serve.served_mode import STORE_ENV, open_store

if TYPE_CHECKING:
    from toolroute.serve.store import UserStore


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


Action = Callable[[argparse.Namespace, "UserStore"], None]


def _on_store(action: Action) -> Callable[[argparse.Namespace], int]:
    """A command handler that runs `action` on the registry named by --store, then closes it."""

    def handler(args: argparse.Namespace) -> int:
        with open_store(args.store, getattr(args, "store_key_file", None)) as store:
            action(args, store)
        return 0

    return handler


def _users_add(args: argparse.Namespace, store: UserStore) -> None:
    store.add_user(args.user)
    print(f"added user {args.user}")
    if args.key:
        print(store.add_key(args.user))


def _users_list(args: argparse.Namespace, store: UserStore) -> None:
    for user in store.users():
        keys = [k for k in store.keys(user) if k.revoked_at is None]
        servers = list(store.server_listing(user))
        print(f"{user}\tkeys={len(keys)}\tservers={','.join(servers) or '-'}")


def _users_remove(args: argparse.Namespace, store: UserStore) -> None:
    store.remove_user(args.user)
    print(f"removed user {args.user}")


def _users_attributes(args: argparse.Namespace, store: UserStore) -> None:
    if args.set is not None:
        try:
            value = json.loads(sys.stdin.read() if args.set == "-" else args.set)
        except ValueError as exc:
            from toolroute.serve.store import StoreError

            raise StoreError(f"the attributes are not JSON: {exc}") from None
        store.set_attributes(args.user, value)
    print(json.dumps(store.attributes(args.user), sort_keys=True))


def _keys_add(args: argparse.Namespace, store: UserStore) -> None:
    print(store.add_key(args.user))


def _keys_list(args: argparse.Namespace, store: UserStore) -> None:
    for key in store.keys(args.user):
        state = "active" if key.revoked_at is None else f"revoked {_when(key.revoked_at)}"
        print(f"{key.key_id}\t{key.user_id}\tcreated {_when(key.created_at)}\t{state}")


def _keys_revoke(args: argparse.Namespace, store: UserStore) -> None:
    store.revoke_key(args.key_id)
    print(f"revoked key {args.key_id}")


def _server_config(text: str) -> Any:
    raw = sys.stdin.read() if text == "-" else text
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        from toolroute.errors import ToolArgumentError

        raise ToolArgumentError(f"the server config is not valid JSON: {exc.msg}") from None


def _servers_add(args: argparse.Namespace) -> int:
    config = _server_config(args.config)  # before the store is opened (or made): a typo changes nothing

    def add(args: argparse.Namespace, store: UserStore) -> None:
        store.add_server(args.user, args.server, config, replace=args.replace)
        print(f"added server {args.server} for user {args.user}")

    return _on_store(add)(args)


def _servers_list(args: argparse.Namespace, store: UserStore) -> None:
    print(json.dumps(store.server_listing(args.user), indent=2, sort_keys=True))


def _servers_remove(args: argparse.Namespace, store: UserStore) -> None:
    store.remove_server(args.user, args.server)
    print(f"removed server {args.server} of user {args.user}")


def _servers_forget_auth(args: argparse.Namespace, store: UserStore) -> None:
    count = store.forget_auth(args.user, args.server)
    which = f"server {args.server}" if args.server else "servers"
    print(f"forgot {count} authorization(s) of user {args.user}'s {which}: the next call asks again")


def _rotate_key(args: argparse.Namespace, store: UserStore) -> None:
    count = store.rotate_secrets()
    print(f"encrypted the secrets of {count} server config(s) again under the first key")


def _actions(parent: Any, dest: str) -> Any:
    actions = parent.add_subparsers(dest=dest, metavar="ACTION", parser_class=type(parent))
    actions.required = True
    return actions


def _command(
    actions: Any, name: str, help: str, handler: Callable[[argparse.Namespace], int], *positionals: str
) -> Any:
    """One ACTION: its positional arguments (plain names such as "user") and its handler."""
    command = actions.add_parser(name, help=help)
    for positional in positionals:
        command.add_argument(positional)
    command.set_defaults(handler=handler)
    return command


def add_users_command(sub: Any) -> None:
    """The `users` command tree, under the CLI's subparsers."""
    users = sub.add_parser(
        "users",
        help="manage served mode's users, their API keys and their own MCP servers",
        description="The user registry of `toolroute serve` (SQLite by default, PostgreSQL for replicas).",
    )
    users.add_argument("--store", metavar="URL", help=f"sqlite:///PATH or postgresql://... (default: ${STORE_ENV})")
    users.add_argument(
        "--store-key-file", metavar="FILE", help="Fernet key(s) of the registry's secrets ($TOOLROUTE_STORE_KEY_FILE)"
    )
    cmds = _actions(users, "users_command")
    add = _command(cmds, "add", "add a user", _on_store(_users_add), "user")
    add.add_argument("--key", action="store_true", help="also make an API key and print it (once)")
    _command(cmds, "list", "list users", _on_store(_users_list))
    _command(cmds, "remove", "remove a user with their keys and servers", _on_store(_users_remove), "user")
    attrs = _command(cmds, "attributes", "show or set a user's attributes", _on_store(_users_attributes), "user")
    attrs.add_argument("--set", metavar="JSON", help="replace them with this JSON object ('-' reads stdin)")
    rotate = "encrypt every stored secret again under the key file's first key (rotation)"
    _command(cmds, "rotate-key", rotate, _on_store(_rotate_key))

    keys = _actions(cmds.add_parser("keys", help="API keys"), "keys_command")
    _command(keys, "add", "make a key for a user and print it (once)", _on_store(_keys_add), "user")
    klist = _command(keys, "list", "list key ids (never the keys)", _on_store(_keys_list))
    klist.add_argument("user", nargs="?")
    _command(keys, "revoke", "revoke a key by its id", _on_store(_keys_revoke), "key_id")

    servers = _actions(cmds.add_parser("servers", help="a user's own MCP servers"), "servers_command")
    sadd = _command(servers, "add", "add an mcpServers entry for a user", _servers_add, "user", "server")
    sadd.add_argument("config", metavar="JSON", help="the server's mcpServers entry; '-' reads stdin")
    sadd.add_argument("--replace", action="store_true", help="replace an existing entry of that id")
    _command(servers, "list", "a user's servers, secrets redacted", _on_store(_servers_list), "user")
    remove_server = _on_store(_servers_remove)
    _command(servers, "remove", "remove one of a user's servers", remove_server, "user", "server")
    forget = "forget a user's OAuth authorization of one server (or of all): the next call asks again"
    forget_auth = _command(servers, "forget-auth", forget, _on_store(_servers_forget_auth), "user")
    forget_auth.add_argument("server", nargs="?")
