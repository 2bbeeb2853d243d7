"""What an upstream HTTP server's replies may weigh.

The SDK reads a JSON reply whole (`response.aread()`), however large (an SSE stream's events it
bounds itself, at 1 MiB each). Here the client's transport counts each JSON reply's bytes as
they arrive: a reply to `tools/list` past the listing cap, or any
reply past `MAX_MESSAGE_BYTES`, ends with a stream error, which the SDK turns into a parse error
for that request at once (the rest is not read). The bytes read are counted for the connection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2

from toolroute.mcp.stdio import MAX_MESSAGE_BYTES, Counter


class ReplyTooLarge(httpx2.StreamError):
    """A reply past its cap."""


def _method(request: httpx2.Request) -> str | None:
    """The JSON-RPC method a POST carries (the SDK sends one message per POST)."""
    try:
        body = json.loads(request.content) if request.method == "POST" else None
    except (ValueError, httpx2.RequestNotRead):
        return None
    return body.get("method") if isinstance(body, dict) else None


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, what: str, counter: Counter) -> None:
        self._inner, self._limit, self._what, self._counter = inner, limit, what, counter

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            self._counter.received += len(chunk)
            if seen > self._limit:
                raise ReplyTooLarge(f"the server sent {self._what} larger than {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """`httpx2.AsyncHTTPTransport` with replies bounded as the module says."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, counter: Counter, max_listing_bytes: int) -> None:
        self._inner, self._counter, self._max_listing_bytes = inner, counter, max_listing_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if not response.headers.get("content-type", "").startswith("application/json"):
            return response  # an SSE stream: the SDK bounds each of its events (1 MiB)
        listing = _method(request) == "tools/list"
        limit = self._max_listing_bytes if listing else MAX_MESSAGE_BYTES
        what = "a tool listing (maxListingBytes)" if listing else "a reply"
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _Bounded(response.stream, limit, what, self._counter)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
