"""A user's own authorization to an upstream server: the bearer token each HTTP request carries.

The gateway does not hold tokens: its host does (served mode keeps them encrypted in the
registry, `serve/upstream_oauth/`). A server added with `auth=` asks its `UpstreamCredentials`
for the token before every request it sends; one the upstream refuses (401) is handed back once
(`rejected`: the host refreshes it), and when there is none the user must authorize first:
no request reaches the upstream, the server lists a single `authorize` tool, and every call
answers -32042 (URLElicitationRequiredError) with the link the user opens.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, runtime_checkable

import httpx2
import mcp_types as types

from toolroute.errors import UpstreamRequestError
from toolroute.textsafety import neutralize

# The one tool a server awaiting its user's authorization lists: a model sees the server and can
# ask for the link; any call of the server answers with it.
AUTHORIZE_TOOL = "authorize"


@runtime_checkable
class UpstreamCredentials(Protocol):
    async def token(self) -> str | None:
        """The access token to send now (refreshed first if it expired); None: not authorized."""

    async def rejected(self, token: str) -> str | None:
        """The upstream refused `token` (401): a fresh one, or None when the user must
        authorize again (the refresh was refused too)."""

    def authorization_url(self) -> str:
        """Where the user goes to authorize (a page that only that user can complete)."""


class BearerAuth(httpx2.Auth):
    """The current token on every request to the upstream; one refresh on a 401. It never
    raises: a request it has no token for goes without (the upstream's 401 ends it, and the call
    then answers with the link: `Connection.call_tool`), as an exception here would end the
    SDK's transport rather than the request."""

    def __init__(self, credentials: UpstreamCredentials) -> None:
        self.credentials = credentials

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.credentials.token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401 or token is None:
            return
        fresh = await self.credentials.rejected(token)
        if fresh is not None:
            request.headers["Authorization"] = f"Bearer {fresh}"
            yield request


def authorize_tool(server: str) -> types.Tool:
    return types.Tool(
        name=AUTHORIZE_TOOL,
        description=(
            f"Connect the user's own account on the MCP server {server!r}: its tools appear once the user "
            "has opened the link this call answers with and authorized access."
        ),
        input_schema={"type": "object", "properties": {}},
    )


def authorization_required(server: str, tool: str | None, url: str) -> UpstreamRequestError:
    """The -32042 error a call of a server awaiting authorization answers with (URL mode)."""
    message = f"Authorize access to the MCP server {server!r}: open {url}"
    error = {
        "code": types.URL_ELICITATION_REQUIRED,
        "message": message,
        "data": {
            "elicitations": [
                {
                    "mode": "url",
                    "elicitationId": f"authorize:{server}",
                    "url": url,
                    "message": f"Open this link to authorize access to {server!r}, then try again.",
                }
            ]
        },
    }
    words = f"MCP server {server!r} needs the user to authorize access first: open {neutralize(url)}"
    return UpstreamRequestError(words, tool=tool, error=error)
