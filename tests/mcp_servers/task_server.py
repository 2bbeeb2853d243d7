"""A stdio MCP server of the 2026-07-28 era that offers the Tasks extension
(`io.modelcontextprotocol/tasks`), on bare JSON-RPC (the installed `mcp` SDK has no tasks). Tools:
`quick(text)` answers at once; `long_job()` runs only as a task: a call whose request does not
declare the extension is refused with -32021 (missing required client capability), one that does
gets a task handle. `tasks/get` answers for the handles it gave.
"""

from __future__ import annotations

import json
import sys

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
TOOLS = [
    {"name": "quick", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "long_job", "description": "Runs only as a task.", "inputSchema": {"type": "object"}},
]


def send(message: dict) -> None:
    if "result" in message:
        message["result"].setdefault("resultType", "complete")
        message["result"].update(ttlMs=0, cacheScope="private")
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    tasks: set[str] = set()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        params = message.get("params") or {}
        declared = TASKS in json.dumps(params.get("_meta") or {})
        if method == "initialize":
            error = {"code": -32022, "message": "unsupported protocol version", "data": {"supported": [MODERN]}}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
        elif method == "server/discover":
            capabilities = {"tools": {}, "extensions": {TASKS: {}}}
            result = {"supportedVersions": [MODERN], "capabilities": capabilities, "serverInfo": {"name": "tasks"}}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call" and params.get("name") == "long_job":
            if not declared:
                data = {"requiredCapabilities": {"extensions": {TASKS: {}}}}
                error = {"code": -32021, "message": "Missing required client capability", "data": data}
                send({"jsonrpc": "2.0", "id": request_id, "error": error})
                continue
            task_id = f"task-{len(tasks) + 1}"
            tasks.add(task_id)
            task = {"taskId": task_id, "status": "working", "ttl": 60000}
            send({"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "task", "task": task}})
        elif method == "tools/call":
            text = (params.get("arguments") or {}).get("text", "")
            send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "tasks/get" and params.get("taskId") in tasks:
            task = {"taskId": params["taskId"], "status": "completed", "ttl": 60000}
            send({"jsonrpc": "2.0", "id": request_id, "result": {"task": task}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
