import json, os, sys, pathlib, shutil
sys.path.insert(0, "tests")
from _stand_in_internet import stand_in_internet
from toolroute import BuiltInToolContext, ToolRouter
ws = pathlib.Path("/work/wt/net/.scratch/ws")
with stand_in_internet({"pkgs.stand-in.test": "internet"}) as si:
    for net in ("internet", ("pkgs.stand-in.test",)):
        ctx = BuiltInToolContext(ws, sandbox="bubblewrap", sandbox_view="minimal", sandbox_network=net, sandbox_uid=1879048300, sandbox_dns=si.internet)
        with ToolRouter(context=ctx) as r:
            out = r.execute("bash", {"command": "getent hosts pkgs.stand-in.test; echo rc=$?; curl -v -sS -m 10 --proxy \"$ALL_PROXY\" http://pkgs.stand-in.test/ 2>&1 | tail -5"})
            d = json.loads(out.text); print(net, d["stdout"], d["stderr"][-1000:])
