import json, os, sys, socket, threading, pathlib, time
from toolroute import BuiltInToolContext, ToolRouter
ws = pathlib.Path("/work/wt/net/.scratch/ws"); ws.mkdir(exist_ok=True); os.chown(ws, 1879048300, 1879048300); os.chmod(ws, 0o700)
srv = socket.socket(); srv.bind(("0.0.0.0", 0)); srv.listen(); port = srv.getsockname()[1]
mode = sys.argv[1] if len(sys.argv) > 1 else "internet"
net = mode if mode in ("internet","host","none") else tuple(mode.split(","))
ctx = BuiltInToolContext(ws, sandbox="bubblewrap", sandbox_view="minimal", sandbox_network=net, sandbox_uid=1879048300, user_id="alice")
r = ToolRouter(context=ctx)
t=time.time()
out = r.execute("bash", {"command": f"id; ip rule | head -4; cat /etc/resolv.conf | tail -2; env | grep -i proxy | head -2; for a in 127.0.0.1 192.0.2.2 10.1.2.3 169.254.169.254; do timeout 3 bash -c \"echo > /dev/tcp/$a/{port}\" && echo reached $a || echo blocked $a; done; ip rule del prio 20; curl -sS -m 5 http://pypi.org/simple/ -o /dev/null -w '%{{http_code}}\\n'"})
print(time.time()-t)
d=json.loads(out.text); print(d["stdout"]); print(d["stderr"][-800:]); print(d["sandbox"], d["exitCode"])
r.close()
