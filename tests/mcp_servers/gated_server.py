"""A stdio MCP server that is slow to start: it answers nothing until the file named by its first
argument exists (at most five minutes), then runs the demo server with the other arguments."""

import os
import runpy
import sys
import time
from pathlib import Path

DEMO = str(Path(__file__).with_name("demo_server.py"))
gate = sys.argv[1]
deadline = time.monotonic() + 300
while not os.path.exists(gate):
    if time.monotonic() > deadline:
        sys.exit("gated server: the gate never opened")
    time.sleep(0.05)
sys.argv = [DEMO, *sys.argv[2:]]
runpy.run_path(DEMO, run_name="__main__")
