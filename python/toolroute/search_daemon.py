"""The search index daemon: `python -m toolroute.search_daemon NAME`.

A process starts this with the socket name it looks for: with `TOOLROUTE_SEARCH_INDEX_DAEMON=1`
when a query finds none, by default (unset) after a first answer of 50 ms or more. It detaches
at once (its starter reaps it; the daemon is its child, in a session of its own), then serves
from the Rust extension until unused for `TOOLROUTE_SEARCH_INDEX_DAEMON_TTL` seconds, asked to
stop, or its socket is taken. See the index daemon in docs/search.md.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m toolroute.search_daemon NAME", file=sys.stderr)
        return 2
    if os.fork():
        os._exit(0)
    os.setsid()
    from toolroute import _core

    _core.search_daemon_serve(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
