"""MCP servers behind the router: `McpGateway` over the official `mcp` SDK (2.x)."""

from toolroute.mcp.config import ServerConfig, load_config_file, parse_config, parse_server
from toolroute.mcp.gateway import McpGateway, McpTarget

__all__ = ["McpGateway", "McpTarget", "ServerConfig", "load_config_file", "parse_config", "parse_server"]
