"""An upstream MCP server whose tools answer with the arguments they received (the policy
tests check what reaches an upstream: fixed values set, hidden ones never there)."""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer

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


if __name__ == "__main__":
    mcp.run("stdio")
