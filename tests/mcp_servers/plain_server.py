"""A stdio MCP server written with the standard library alone: JSON-RPC 2.0, one message a line.

A tenant's own stdio server runs in that tenant's sandbox (the minimal view, the tenant's uid),
where neither the test suite's virtual environment nor its folder may be visible or passable;
the system's `python3` is, and this file's source is handed to it with `-c` (`tenant_stdio` in
`_mcp_helpers.py`). It speaks the handshake every client of the 2025 revisions sends
(`initialize`), then `tools/list` and `tools/call`. Besides harmless tools (`add`, `echo`) it has
the probes of an attacker's server: what it runs as (`whoami`), and what it can read, list or
connect to (`read`, `listdir`, `connect`, `tcp`).
"""

import json
import os
import socket
import sys

NAME = sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "plain"


def _schema(**properties):
    return {"type": "object", "properties": properties, "required": list(properties)}


TOOLS = [
    ("add", "Add two integers.", _schema(a={"type": "integer"}, b={"type": "integer"})),
    ("echo", "Echo the text back, tagged with the server name.", _schema(text={"type": "string"})),
    ("whoami", "The uid, gid, working folder, HOME and pid this server runs with.", _schema()),
    ("read", "The text of a file.", _schema(path={"type": "string"})),
    ("listdir", "The names in a folder.", _schema(path={"type": "string"})),
    ("connect", "Connect to a unix socket and read what it says first.", _schema(path={"type": "string"})),
    (
        "tcp",
        "Connect over TCP and read what the peer says first.",
        _schema(host={"type": "string"}, port={"type": "integer"}),
    ),
]


def call(name, args):
    if name == "add":
        return str(int(args["a"]) + int(args["b"]))
    if name == "echo":
        return f"{NAME}:{args['text']}"
    if name == "whoami":
        info = {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(), "pid": os.getpid()}
        return json.dumps({**info, "home": os.environ.get("HOME"), "env": sorted(os.environ)})
    if name == "read":
        with open(args["path"], encoding="utf-8", errors="replace") as f:
            return f.read()
    if name == "listdir":
        return "\n".join(sorted(os.listdir(args["path"])))
    if name == "connect":
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(args["path"])
            return "connected: " + s.recv(64).decode(errors="replace")
    if name == "tcp":
        with socket.create_connection((args["host"], int(args["port"])), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return "connected: " + s.recv(200).decode(errors="replace")
    raise KeyError(f"no tool {name!r}")


def answer(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": NAME, "version": "1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [{"name": n, "description": d, "inputSchema": s} for n, d, s in TOOLS]}
    if method == "tools/call":
        try:
            text, failed = call(params["name"], params.get("arguments") or {}), False
        except Exception as exc:  # a tool's failure is its result, as MCP has it
            text, failed = f"{type(exc).__name__}: {exc}", True
        return {"content": [{"type": "text", "text": text}], "isError": failed}
    raise LookupError(method)


def main():
    print(f"plain server {NAME} starting", file=sys.stderr, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification
        try:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
        except LookupError as exc:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {exc}"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


main()
