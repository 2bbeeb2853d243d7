"""`toolroute serve`: an allowlist of the router's tools as an MCP server (stdio, streamable HTTP)."""

from toolroute.serve.options import RouterOptions, build_router, default_function_list, split_list
from toolroute.serve.server import ServedTools, build_server, run, serve_http, serve_stdio

__all__ = [
    "RouterOptions",
    "ServedTools",
    "build_router",
    "build_server",
    "default_function_list",
    "run",
    "serve_http",
    "serve_stdio",
    "split_list",
]
