"""An upstream MCP server whose tools answer with the arguments they received (the policy
tests check what reaches an upstream: fixed values set, hidden ones never there)."""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

mcp = MCPServer("args", version="1.0")


@mcp.tool()
def deploy(service: str, region: str = "eu", token: str = "<unset>", dry_run: bool = True) -> str:
    """Deploy a service to a region."""
    received: dict[str, Any] = {"service": service, "region": region, "token": token, "dry_run": dry_run}
    return json.dumps(received, sort_keys=True)


@mcp.tool()
def status(service: str) -> str:
    """The status of a service."""
    return f"{service}: up"


@mcp.tool()
def request_meta(ctx: Context) -> str:
    """The `_meta` of this request, as received (the trace context a gateway passed on)."""
    meta = ctx.request_context.meta
    if hasattr(meta, "model_dump"):
        meta = meta.model_dump(by_alias=True, exclude_none=True)
    return json.dumps(dict(meta or {}), sort_keys=True, default=str)


if __name__ == "__main__":
    mcp.run("stdio")
