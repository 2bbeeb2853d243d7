"""A stdio 'server' that reads its input and never answers: a hung MCP server."""

import sys
import time

print("hung server: reading forever", file=sys.stderr, flush=True)
for _line in sys.stdin:
    pass
time.sleep(60)
