import json, os, sys, socket, pathlib, time
from toolroute import BuiltInToolContext, ToolRouter
from toolroute.builtins._process.egress import EGRESS
EGRESS.listen(lambda r: print("REFUSED", r))
ws = pathlib.Path("/work/wt/net/.scratch/ws"); ws.mkdir(exist_ok=True); os.chown(ws, 1879048300, 1879048300); os.chmod(ws, 0o700)
ctx = BuiltInToolContext(ws, sandbox="bubblewrap", sandbox_view="minimal", sandbox_network=("pypi.org","*.example.org"), sandbox_uid=1879048300, user_id="alice")
r = ToolRouter(context=ctx)
out = r.execute("bash", {"command": "ip rule; getent hosts pypi.org; getent hosts github.com || echo nx; curl -sS -m 8 https://pypi.org/simple/ -o /dev/null -w '%{http_code}\\n'; curl -sS -m 5 http://github.com/ ; echo; curl -sS -m 5 https://github.com/ -o /dev/null; curl -sS -m5 --socks5-hostname 127.0.0.1:3128 --proxy-user x:y http://github.com -o /dev/null; timeout 3 bash -c 'echo > /dev/tcp/192.0.2.1/80' || echo direct blocked"})
d=json.loads(out.text); print(d["stdout"]); print(d["stderr"][-1500:]); print(d["sandbox"], d["exitCode"])
r.close()
