"""Today's build (main) against the served attack: a tenant's psql to the registry on 127.0.0.1."""
import sys, os, shutil, json
sys.path.insert(0, "tests"); sys.path.insert(0, "tests/serve")
import test_serve_network as t
from _serve_helpers import outside_tmp, served_http, tool_env
from _postgres import postgres_server
from _stand_in_internet import stand_in_internet
from urllib.parse import urlsplit
base = outside_tmp()
with stand_in_internet(t.NAMES) as si, postgres_server() as dsn:
    keys = t._register(dsn, base)
    env = tool_env(XDG_CONFIG_HOME=str(base / "config"), XDG_CACHE_HOME=str(base / "cache"), PYTHONPATH="/work/main/python")
    args = ["--functions", "bash", "--api-keys", "--store", dsn, "--workspace-template", str(base / "ws" / "{user}"), "--sandbox", "bubblewrap", "--network"]
    with served_http(args, env) as served:
        d = t.Deployment(served, base, keys, si, urlsplit(dsn.replace("postgresql://", "http://")).port)
        out = t.bash(d, "alice", f"psql -h 127.0.0.1 -p {d.pg_port} -U toolroute -d postgres -Atc 'select count(*) from users' 2>&1; " + t._tcp(si.private, 80) + "; " + t._tcp(si.metadata, 80))
        print(out["stdout"], out["sandbox"])
        print("stand-in log:", si.reached())
shutil.rmtree(base, ignore_errors=True)
