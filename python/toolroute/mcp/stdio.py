"""The stdio transport to an upstream server, with what it reads bounded.

The SDK's `stdio_client` decodes the server's stdout as text and parses each line; a line that is
not valid UTF-8, not JSON, or nested past the parser's depth limit is logged and dropped, and the
call it answered waits out its whole timeout (60 s). A line without an end grows without bound,
copied whole at every chunk. This transport is the SDK's, its process handling reused as it is,
with a reader of its own: lines of at most `max_bytes`, decoded strictly, and a malformed one
answers at once, with what was wrong, the request it names (its `id`, read loosely) or, when it
names none still waiting, every request still waiting. The session lives on: the next line is
read as usual. A reply to `tools/list` longer than `max_listing_bytes` is refused as soon as it
is that long, unparsed and the rest unread. Bytes read are counted (`received`), so a listing of
many pages can be capped in bytes too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import IO, Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.client import stdio as sdk
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("toolroute.mcp")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one message from a server (a page of tools, a result)
HEAD = 4096  # bytes of a line read for its `id`
MAX_PENDING = 100_000  # requests remembered as waiting for an answer
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


class Counter:
    """Bytes read from one server, for its connection to see."""

    def __init__(self) -> None:
        self.received = 0


def malformed(line: bytes) -> tuple[types.JSONRPCMessage | None, str | None]:
    """The message on `line`, or why it is none: not UTF-8, not JSON, too deep, not JSON-RPC."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"a reply that is not valid UTF-8 (byte {line[exc.start]:#04x} at offset {exc.start})"
    try:
        return types.jsonrpc_message_adapter.validate_json(line, by_name=False), None
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        message = str(first.get("msg", "invalid"))
        if "recursion limit" in message:
            return None, "a reply nested deeper than the JSON parser's limit (about 200 levels)"
        if first.get("type") == "json_invalid":
            return None, f"a reply that is not JSON ({message})"
        return None, f"a reply that is not a JSON-RPC message ({message})"


def named_id(line: bytes) -> int | str | None:
    """The `id` a malformed line names, read loosely (the first `"id": ...` in it)."""
    found = _ID.search(line[:HEAD])
    if found is None:
        return None
    raw = found.group(1)
    if raw.startswith(b'"'):
        return raw[1:-1].decode("utf-8", "replace")
    return int(raw)


class _Lines:
    """Splits chunks into lines of at most `limit(head)` bytes (`head`: the line's first 4 KiB, so
    the limit may depend on the request it answers); past it, the rest of that line is skipped,
    and its head reported once."""

    def __init__(self, limit: Callable[[bytes], int], floor: int) -> None:
        self.limit = limit
        self.floor = floor  # no line this long or shorter is over its limit
        self._buf = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> tuple[list[bytes], bytes | None]:
        """Complete lines in `chunk`, and the head of a line that just went over its limit."""
        lines: list[bytes] = []
        overflow: bytes | None = None
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
            else:
                self._buf += chunk[start:end]
                head = bytes(self._buf[:HEAD])
                if len(self._buf) > self.floor and len(self._buf) > self.limit(head):
                    overflow = head
                else:
                    lines.append(bytes(self._buf))
            self._buf.clear()
            start = end + 1
        if not self._skipping:
            self._buf += chunk[start:]
            head = bytes(self._buf[:HEAD])
            if len(self._buf) > self.floor and len(self._buf) > self.limit(head):
                self._buf = bytearray()  # given back now, not when the line ends
                self._skipping, overflow = True, head
        return lines, overflow


@asynccontextmanager
async def bounded_stdio_client(
    server: sdk.StdioServerParameters,
    errlog: IO[bytes],
    *,
    counter: Counter,
    max_bytes: int = MAX_MESSAGE_BYTES,
    max_listing_bytes: int | None = None,
    on_malformed: Callable[[str], None] | None = None,
) -> AsyncGenerator[TransportStreams, None]:
    """`mcp.client.stdio.stdio_client`, reading as the module says."""
    command = await sdk._get_executable_command(server.command)
    process = await sdk._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk.get_default_environment() | (server.env or {}),
        errlog=errlog,  # type: ignore[arg-type]  # a real file: the child writes to it
        cwd=server.cwd,
    )
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    pending: dict[int | str, str] = {}  # requests sent and not answered, the oldest first
    shutting_down = False
    writer_done = anyio.Event()

    async def fail(rid: int | str, why: str) -> None:
        pending.pop(rid, None)
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"the server sent {why}")
        await read_stream_writer.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error)))

    async def refuse(line: bytes | None, why: str) -> None:
        """Answer the request a bad line names, else every one still waiting."""
        if on_malformed is not None:
            on_malformed(why)
        rid = None if line is None else named_id(line)
        for target in [rid] if rid in pending else list(pending):
            await fail(target, why)

    async def deliver(line: bytes) -> None:
        if not line.strip():
            return
        message, why = malformed(line)
        if message is None:
            await refuse(line, why or "a malformed reply")
            return
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            pending.pop(message.id, None)
        await read_stream_writer.send(SessionMessage(message))

    async def stdout_reader() -> None:
        assert process.stdout, "Opened process is missing stdout"

        def limit(head: bytes) -> int:
            """A reply to `tools/list` is cut at the listing's cap, before it is all read."""
            if max_listing_bytes is not None:
                rid = named_id(head)
                if rid is not None and pending.get(rid) == "tools/list":
                    return min(max_bytes, max_listing_bytes)
            return max_bytes

        lines = _Lines(limit, min(max_bytes, max_listing_bytes or max_bytes))
        try:
            async with read_stream_writer:
                try:
                    async for chunk in process.stdout:
                        counter.received += len(chunk)
                        complete, overflow = lines.feed(chunk)
                        try:
                            for line in complete:
                                await deliver(line)
                            if overflow is not None:
                                cap = limit(overflow)
                                if cap < max_bytes:
                                    why = f"a tool listing larger than {cap} bytes (maxListingBytes)"
                                else:
                                    why = f"a reply larger than {cap} bytes"
                                await refuse(overflow, why)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return
                finally:
                    await sdk._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                log.exception("Reading from the MCP server's stdout failed mid-session")

    async def stdin_writer() -> None:
        assert process.stdin, "Opened process is missing stdin"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    message: Any = session_message.message
                    if isinstance(message, types.JSONRPCRequest):
                        pending[message.id] = message.method
                        if len(pending) > MAX_PENDING:  # answers that never came: forgotten
                            pending.pop(next(iter(pending)))
                    elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                        pending.pop((message.params or {}).get("requestId", None), None)  # type: ignore[arg-type]
                    json = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((json + "\n").encode(server.encoding, server.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await sdk._stop_server_process(process)
        await sdk._aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
