"""One grep query in a new process, timed from the call to its answer (the import and setup
before it are not the query's): prints its seconds, its answer and whether the index it used
was read back from the on-disk cache, or answered by an index daemon. Run by bench_search_cold.py
(`warm` as a fourth argument: have the index made ready, through the daemon when there is one).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext


def main() -> None:
    root, pattern, opts = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    conf = BuiltInToolContext(root).confinement
    if sys.argv[4:] == ["warm"]:
        print(json.dumps({"ready": _core.search_index_warm(conf, timeout=600)}))
        return
    start = time.perf_counter()
    r = _core.grep(conf, GrepRequest(pattern=pattern, **opts), max_line_bytes=8192)
    seconds = time.perf_counter() - start
    daemon = _core.search_daemon_answered()
    stats = _core.search_index_stats(conf)
    answer = [r.files_matched, r.match_lines, [repr(row) for row in r.rows()], repr(sorted(r.stats.items()))]
    print(
        json.dumps(
            {
                "seconds": seconds,
                "answer": answer,
                "restored": stats["restored"],
                "served": stats["served"],
                "daemon": daemon,
            }
        )
    )


if __name__ == "__main__":
    main()
