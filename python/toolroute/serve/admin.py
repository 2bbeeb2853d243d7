"""`toolroute users`: manage served mode's user registry (users, API keys, users' own MCP servers).

Secrets never reach the terminal except a new API key, printed once when it is made: listings
show key ids and redacted server configs.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from toolroute.serve.served_mode import STORE_ENV, open_store


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _users_add(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        store.add_user(args.user)
        print(f"added user {args.user}")
        if args.key:
            print(store.add_key(args.user))
    return 0


def _users_list(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        for user in store.users():
            keys = [k for k in store.keys(user) if k.revoked_at is None]
            servers = list(store.servers(user))
            print(f"{user}\tkeys={len(keys)}\tservers={','.join(servers) or '-'}")
    return 0


def _users_remove(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        store.remove_user(args.user)
    print(f"removed user {args.user}")
    return 0


def _keys_add(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        print(store.add_key(args.user))
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        for key in store.keys(args.user):
            state = "active" if key.revoked_at is None else f"revoked {_when(key.revoked_at)}"
            print(f"{key.key_id}\t{key.user_id}\tcreated {_when(key.created_at)}\t{state}")
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        store.revoke_key(args.key_id)
    print(f"revoked key {args.key_id}")
    return 0


def _servers_add(args: argparse.Namespace) -> int:
    raw = sys.stdin.read() if args.config == "-" else args.config
    try:
        config: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        from toolroute.errors import ToolArgumentError

        raise ToolArgumentError(f"the server config is not valid JSON: {exc.msg}") from None
    with open_store(args.store) as store:
        store.add_server(args.user, args.server, config, replace=args.replace)
    print(f"added server {args.server} for user {args.user}")
    return 0


def _servers_list(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        print(json.dumps(store.server_listing(args.user), indent=2, sort_keys=True))
    return 0


def _servers_remove(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        store.remove_server(args.user, args.server)
    print(f"removed server {args.server} of user {args.user}")
    return 0


def add_users_command(sub: Any) -> None:
    """The `users` command tree, under the CLI's subparsers."""
    users = sub.add_parser(
        "users",
        help="manage served mode's users, their API keys and their own MCP servers",
        description="The user registry of `toolroute serve` (SQLite by default, PostgreSQL for replicas).",
    )
    users.add_argument("--store", metavar="URL", help=f"sqlite:///PATH or postgresql://... (default: ${STORE_ENV})")
    cmds = users.add_subparsers(dest="users_command", metavar="ACTION", parser_class=type(users))
    cmds.required = True

    add = cmds.add_parser("add", help="add a user")
    add.add_argument("user")
    add.add_argument("--key", action="store_true", help="also make an API key and print it (once)")
    add.set_defaults(handler=_users_add)
    cmds.add_parser("list", help="list users").set_defaults(handler=_users_list)
    remove = cmds.add_parser("remove", help="remove a user with their keys and servers")
    remove.add_argument("user")
    remove.set_defaults(handler=_users_remove)

    keys = cmds.add_parser("keys", help="API keys").add_subparsers(
        dest="keys_command", metavar="ACTION", parser_class=type(users)
    )
    keys.required = True
    kadd = keys.add_parser("add", help="make a key for a user and print it (once)")
    kadd.add_argument("user")
    kadd.set_defaults(handler=_keys_add)
    klist = keys.add_parser("list", help="list key ids (never the keys)")
    klist.add_argument("user", nargs="?")
    klist.set_defaults(handler=_keys_list)
    krevoke = keys.add_parser("revoke", help="revoke a key by its id")
    krevoke.add_argument("key_id")
    krevoke.set_defaults(handler=_keys_revoke)

    servers = cmds.add_parser("servers", help="a user's own MCP servers").add_subparsers(
        dest="servers_command", metavar="ACTION", parser_class=type(users)
    )
    servers.required = True
    sadd = servers.add_parser("add", help="add an mcpServers entry for a user")
    sadd.add_argument("user")
    sadd.add_argument("server")
    sadd.add_argument("config", metavar="JSON", help="the server's mcpServers entry; '-' reads stdin")
    sadd.add_argument("--replace", action="store_true", help="replace an existing entry of that id")
    sadd.set_defaults(handler=_servers_add)
    slist = servers.add_parser("list", help="a user's servers, secrets redacted")
    slist.add_argument("user")
    slist.set_defaults(handler=_servers_list)
    sremove = servers.add_parser("remove", help="remove one of a user's servers")
    sremove.add_argument("user")
    sremove.add_argument("server")
    sremove.set_defaults(handler=_servers_remove)
