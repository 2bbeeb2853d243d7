import sys, os, shutil, time
sys.path.insert(0, "tests"); sys.path.insert(0, "tests/serve")
import test_serve_network as t
from _serve_helpers import outside_tmp
base = outside_tmp()
(base/"registry").mkdir()
dsn = f"sqlite:///{base/'registry'/'users.db'}"
keys = t._register(dsn, base)
for served in t._serve(dsn, base, ["--network"]):
    d = t.Deployment(served, base, keys, None)
    print(t.call(d, "alice", "user_alice_tool_tcp", {"host": "127.0.0.1", "port": 9}))
    time.sleep(1)
    print(served.drain()[-3000:])
shutil.rmtree(base)
