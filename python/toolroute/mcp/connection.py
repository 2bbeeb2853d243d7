"""One upstream MCP connection, owned by its own task on the gateway loop.

The owner task enters the transport and the `ClientSession` and exits them itself, in order, so
connections can be started and stopped in any order (the SDK's `ClientSessionGroup` cannot). A
connection that died is started again on the next use; other connections never notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
import json
import logging
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, ToolsListChanged, listen
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPError

from toolroute.asking import Answer, Asker, Question
from toolroute.errors import ToolError, ToolExecutionError, ToolTimeoutError
from toolroute.mcp.asked import Asked, CallInProgress, input_deferred, input_needed, url_required
from toolroute.mcp.capabilities import capability_missing
from toolroute.mcp.config import ServerConfig
from toolroute.mcp.credentials import (
    AUTHORIZE_TOOL,
    BearerAuth,
    UpstreamCredentials,
    authorization_required,
    authorize_tool,
)
from toolroute.mcp.deadlines import deadline
from toolroute.mcp.errors import describe, is_connection_lost, is_session_lost, is_timeout, leaf
from toolroute.mcp.freshness import UNKNOWN, Freshness, of_result
from toolroute.mcp.http_bounds import BoundedTransport
from toolroute.mcp.stdio import Counter, bounded_stdio_client
from toolroute.naming import parse_user_service_key
from toolroute.progress import ProgressSink
from toolroute.textsafety import neutralize

log = logging.getLogger("toolroute.mcp")

MAX_LIST_PAGES = 1000  # a server that pages forever is cut off here
STDERR_TAIL_BYTES = 4096
# A 2026-07-28 session's tool-list changes come on a `subscriptions/listen` stream: re-opened
# this long after it ends while the session lives, at most this many times in a row.
RELISTEN_DELAY = 1.0
RELISTEN_TRIES = 5
RELISTEN_RESET = 30.0  # a stream open at least this long counts as working
# After a call timed out, a server that does not answer a ping within this is taken for hung
# as a whole (stopped, deadlocked) and restarted; one that answers was only slow at that call.
PING_TIMEOUT = 5.0
# What one listing may hold (per server, `maxTools` and `maxListingBytes` override): past either,
# the listing is refused and the server left out, its memory given back at once.
MAX_TOOLS = 10_000
MAX_LISTING_BYTES = 8 * 1024 * 1024
MALFORMED_LOG_EVERY = 10.0  # seconds: one log line at most this often per server for bad replies


class Connection:
    """A lazily (re)started session to one server; safe for concurrent calls (JSON-RPC multiplexes)."""

    def __init__(
        self,
        key: str,
        config: ServerConfig,
        *,
        connect_timeout: float,
        on_tools_changed: Callable[[Connection], None] | None = None,
        credentials: UpstreamCredentials | None = None,
    ) -> None:
        self.key = key
        # The user's own authorization (an HTTP server added with `auth=`): the token goes on
        # every request; without one nothing is sent and the server only offers `authorize`.
        self.credentials = credentials
        self._bearer = None if credentials is None else BearerAuth(credentials)
        self.awaiting_authorization = False  # it listed `authorize` instead of its own tools
        self.config = config
        self.connect_timeout = connect_timeout
        self.connects = 0  # successful handshakes so far (a reconnect increments it)
        self.era: Era | None = None  # the protocol era of the current session, once connected
        self.instructions: str | None = None  # what the server said of itself, once connected
        self.capabilities: types.ServerCapabilities | None = None
        self._on_tools_changed = on_tools_changed
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._stderr: IO[bytes] | None = None
        self._closed = False
        self._checking: asyncio.Task[None] | None = None  # the ping after a timed-out call
        self._starting: asyncio.Task[None] | None = None  # the owner task while it shakes hands
        self.unresponsive = 0  # restarts because the server answered nothing, not even a ping
        self.counter = Counter()  # bytes read from the server (stdio), for the listing's cap
        self.malformed = 0  # replies refused as not UTF-8, not JSON, too deep or too large
        self._malformed_logged = -MALFORMED_LOG_EVERY
        self.asked = Asked(self)  # the calls in progress, to whose clients the server's questions go
        # The caching hints of each kind's last listing (2026-07-28 `ttlMs`/`cacheScope`).
        self.freshness: dict[str, Freshness] = {}

    # ---- lifecycle -----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._session is not None and not _dispatcher_closed(self._session)

    async def session(self) -> ClientSession:
        """The live session, starting (or restarting) the server first if needed."""
        if self.connected:
            assert self._session is not None
            return self._session
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._closed:
                raise ToolExecutionError(f"MCP server {self.key!r} is closed")
            if not self.connected:
                await self._stop_owner()
                await self._start()
            assert self._session is not None
            return self._session

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[ClientSession] = loop.create_future()
        stop = asyncio.Event()
        owner = loop.create_task(self._own(ready, stop), name=f"toolroute-mcp:{self.key}")
        self._starting = owner
        try:
            session = await asyncio.shield(ready)
        except asyncio.CancelledError:
            stop.set()
            raise
        finally:
            self._starting = None
        self._session, self._owner, self._stop = session, owner, stop
        self.connects += 1

    async def _own(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        # A real file, so the child can write to it; its tail makes start-up failures readable.
        stderr = tempfile.TemporaryFile() if self.config.transport == "stdio" else None  # noqa: SIM115
        self._stderr = stderr
        try:
            async with (
                self._transport(stderr) as (read, write),
                ClientSession(
                    read,
                    write,
                    message_handler=self._on_message,
                    # Declared, so an upstream asks: each question goes to the client of the call
                    # that caused it, or is refused as a client without the callback refuses it.
                    elicitation_callback=self._on_elicitation,
                    sampling_callback=self._on_sampling,
                    list_roots_callback=self._on_roots,
                    logging_callback=self._on_log,
                ) as session,
            ):
                with anyio.fail_after(self.connect_timeout):
                    self.era = await self._negotiate(session)
                    self.instructions = session.instructions
                    self.capabilities = session.server_capabilities
                ready.set_result(session)
                if self.era == MODERN and self._on_tools_changed is not None:
                    await self._listening(session, stop)
                else:
                    await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(self._connect_error(exc))
            elif not isinstance(leaf(exc), (asyncio.CancelledError, anyio.get_cancelled_exc_class())):
                log.debug("MCP server %r: session ended with %s", self.key, describe(exc))
        finally:
            if self._session is not None and self._stop is stop:
                self._session = None
            if stderr is not None:
                stderr.close()

    async def _negotiate(self, session: ClientSession) -> Era:
        """Open the session in the configured era. `negotiate` shakes hands and moves to the modern
        era only when the server's rejection names it (no probe, so no stall on legacy servers);
        `auto` probes once per server; both remember what the server answered."""
        wanted: str = self.config.protocol
        if wanted in ("auto", "negotiate"):
            wanted = _ERAS.get(self._identity, wanted)
        if wanted in ("legacy", "negotiate"):
            try:
                await session.initialize()
                return "legacy"
            except MCPError as exc:
                if not _names_modern(exc):
                    raise
                if self.config.protocol == "legacy":
                    raise ToolExecutionError(
                        f"MCP server {self.key!r} speaks only the 2026-07-28 revision: set "
                        '"protocol": "2026-07-28" (or leave "protocol" out) in its configuration'
                    ) from None
                wanted = MODERN  # a modern-only server says so: positive evidence, no guess
        if wanted == MODERN:
            await session.discover()
            _remember(self._identity, MODERN)
            return MODERN
        era = await _probe(session, min(PROBE_TIMEOUT, self.connect_timeout / 2))
        _remember(self._identity, era)
        return era

    @property
    def _identity(self) -> str:
        """What makes two configurations the same server, for the era remembered."""
        cfg = self.config
        return json.dumps([cfg.transport, cfg.command, cfg.args, cfg.url, sorted(cfg.env.items())])

    def _transport(self, stderr: IO[bytes] | None) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        cfg = self.config
        if cfg.transport == "stdio":
            assert cfg.command is not None
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=dict(cfg.env), cwd=cfg.cwd)
            assert stderr is not None
            return bounded_stdio_client(
                params,
                stderr,
                counter=self.counter,
                max_listing_bytes=self._max_listing_bytes,
                on_malformed=self._on_malformed,
            )
        assert cfg.url is not None
        if cfg.transport == "sse":
            return sse_client(
                cfg.url, headers=dict(cfg.headers), timeout=self.connect_timeout, httpx_client_factory=_http_client
            )
        return _streamable_http(
            cfg.url,
            dict(cfg.headers),
            self.connect_timeout,
            BoundedTransport(_transport(), self.counter, self._max_listing_bytes),
            self._bearer,
        )

    async def _listening(self, session: ClientSession, stop: asyncio.Event) -> None:
        """Until `stop`: hear the session's tool-list changes (the 2026-07-28 era sends them only
        on a `subscriptions/listen` stream, not as plain notifications)."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._listen, session)
            await stop.wait()
            tasks.cancel_scope.cancel()

    async def _listen(self, session: ClientSession) -> None:
        tries = 0  # streams in a row that ended within RELISTEN_RESET of opening
        while tries < RELISTEN_TRIES and not _dispatcher_closed(session):
            opened = time.monotonic()
            try:
                async with listen(session, tools_list_changed=True) as subscription:
                    if not subscription.honored.tools_list_changed:
                        return  # the server does not tell: nothing to hear
                    if tries:
                        self._tools_changed()  # no replay: what changed meanwhile is refetched
                    async for event in subscription:
                        if isinstance(event, ToolsListChanged):
                            self._tools_changed()
            except ListenNotSupportedError:
                return
            except (MCPError, SubscriptionLost, TimeoutError) as exc:
                log.debug("MCP server %r: tool-list subscription ended: %s", self.key, describe(exc))
            # A stream that lasted is a fresh start; one that keeps ending at once is given up on.
            tries = 1 if time.monotonic() - opened >= RELISTEN_RESET else tries + 1
            await anyio.sleep(RELISTEN_DELAY)

    def _on_malformed(self, why: str) -> None:
        """A reply refused: counted, and logged at most once every MALFORMED_LOG_EVERY seconds."""
        self.malformed += 1
        now = time.monotonic()
        if now - self._malformed_logged >= MALFORMED_LOG_EVERY:
            self._malformed_logged = now
            log.warning("MCP server %r sent %s (%d refused so far)", self.key, neutralize(why), self.malformed)

    def _tools_changed(self) -> None:
        if self._on_tools_changed is not None:
            self._on_tools_changed(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()
        elif isinstance(message, Exception):
            log.debug("MCP server %r: transport error %s", self.key, describe(message))

    async def _on_elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return await self.asked.put(types.ElicitRequest(params=params))

    async def _on_sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        return await self.asked.put(types.CreateMessageRequest(params=params))

    async def _on_roots(self, context: ClientRequestContext) -> Any:
        return await self.asked.put(types.ListRootsRequest())

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.asked.tell(params)

    async def _stop_owner(self) -> None:
        owner, stop = self._owner, self._stop
        self._owner = self._stop = None
        self._session = None
        if owner is None or stop is None:
            return
        stop.set()
        try:
            await asyncio.shield(owner)  # the owner exits its own contexts
        except asyncio.CancelledError:
            if not owner.done():
                raise  # we were cancelled; the owner still finishes closing on its own
        except Exception as exc:
            log.debug("MCP server %r: closing raised %s", self.key, describe(exc))

    async def reset(self) -> None:
        """Drop the session (and the server process); the next use starts a fresh one."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self._stop_owner()

    async def close(self) -> None:
        self._closed = True
        if self._checking is not None:
            self._checking.cancel()
        if self._starting is not None:
            # A handshake in progress ends now, not at its timeout: a server that never answers
            # held the gateway's close (and so a SIGTERMed server) for its whole connect timeout.
            self._starting.cancel()
        await self.reset()

    # ---- errors ------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        f = self._stderr
        if f is None or f.closed:
            return ""
        try:
            end = f.seek(0, 2)
            f.seek(max(0, end - STDERR_TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()][-10:]
        return neutralize("\n".join(lines))  # the server's own output, shown in error messages

    def _with_stderr(self, message: str) -> str:
        tail = self.stderr_tail()
        return f"{message}\nserver stderr (last lines):\n{tail}" if tail else message

    def _connect_error(self, exc: BaseException) -> ToolError:
        inner = leaf(exc)
        where = f"MCP server {self.key!r} ({self.config.describe()})"
        if is_timeout(inner):
            err: ToolError = ToolTimeoutError(
                self._with_stderr(f"{where} did not complete the MCP handshake within {self.connect_timeout}s")
            )
        else:
            err = ToolExecutionError(self._with_stderr(f"cannot connect to {where}: {describe(inner)}"))
        err.__cause__ = inner
        return err

    # ---- requests ------------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        """Every tool, following `next_cursor` page by page."""
        tools: list[types.Tool] = await self.list_all("tools")
        return tools

    async def list_all(self, kind: Listable) -> list[Any]:
        """Every item of one list method (`tools`, `prompts`, `resources`, `resource_templates`),
        following `next_cursor` page by page; an empty list when the server does not offer them."""
        if self.credentials is not None and await self.credentials.token() is None:
            # Not authorized by its user yet: nothing is sent; the model sees how to ask.
            await self.reset()
            self.awaiting_authorization = True
            return [authorize_tool(self._shown)] if kind == "tools" else []
        if kind == "tools":
            self.awaiting_authorization = False
        session = await self.session()
        if kind != "tools" and not self.offers(kind):
            return []
        method = getattr(session, f"list_{kind}")
        items: list[Any] = []
        cursor: str | None = None
        fresh: Freshness | None = None
        self.freshness.pop(kind, None)  # a listing that fails promises nothing
        start = self.counter.received
        try:
            for _ in range(MAX_LIST_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                with anyio.fail_after(self.connect_timeout):
                    page = await method(params=params)
                items.extend(getattr(page, kind))
                cursor = page.next_cursor
                fresh = of_result(page) if fresh is None else fresh & of_result(page)
                del page  # a refused listing's memory goes with `items`, nothing else holds it
                self._within_caps(kind, len(items), self.counter.received - start)
                if not cursor:
                    break
        except ListingTooLarge as exc:
            # The session goes too (the SDK keeps per-tool state of every listing it saw), and
            # with it the server: it is left out, retried later like one that is down.
            items.clear()
            await self.reset()
            give_back_memory()
            log.warning("MCP server %r: %s", self.key, exc)
            raise ToolExecutionError(f"MCP server {self.key!r}: {exc}") from None
        except Exception as exc:
            if is_connection_lost(exc) or is_session_lost(exc):
                await self.reset()
            what = f"listing the {kind.replace('_', ' ')}"
            raise self._request_error(exc, what, None, self.connect_timeout) from None
        self.freshness[kind] = fresh or UNKNOWN
        return items

    def _within_caps(self, kind: Listable, count: int, received: int) -> None:
        """Refuse a listing past the server's caps (bytes are counted on stdio only: over HTTP the
        transport bounds each message instead)."""
        if kind != "tools":
            return
        most = self.config.max_tools if self.config.max_tools is not None else MAX_TOOLS
        if count > most:
            raise ListingTooLarge(f"its tool listing has more than {most} tools (maxTools): refused")
        if received > self._max_listing_bytes:
            raise ListingTooLarge(
                f"its tool listing is larger than {self._max_listing_bytes} bytes (maxListingBytes): refused"
            )

    @property
    def _max_listing_bytes(self) -> int:
        cap = self.config.max_listing_bytes
        return cap if cap is not None else MAX_LISTING_BYTES

    def offers(self, kind: Listable) -> bool:
        """Whether the connected server declared the capability behind `kind`."""
        caps = self.capabilities
        if caps is None:
            return False
        return (caps.prompts if kind == "prompts" else caps.resources if kind != "tools" else caps.tools) is not None

    async def request(self, what: str, send: Callable[[ClientSession], Awaitable[Any]], timeout: float) -> Any:
        """One request besides a tool call (`prompts/get`, `resources/read`), within `timeout`; a
        lost connection is reported and the server restarted on the next use."""
        if self.credentials is not None and await self.credentials.token() is None:
            raise authorization_required(self._shown, None, self.credentials.authorization_url())
        session = await self.session()
        try:
            with hard_deadline(timeout):
                return await send(session)
        except MCPError:
            raise  # the server's own answer (an unknown prompt, a bad argument): passed as it is
        except Exception as exc:
            if is_connection_lost(exc) or is_session_lost(exc):
                await self.reset()
            raise self._request_error(exc, what, None, timeout) from None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout: float,
        *,
        exposed: str | None = None,
        progress: ProgressSink | None = None,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """One `tools/call`. A forgotten HTTP session is re-initialised and retried once (the
        server never ran the request); a crash is reported and the server restarted next time.
        What the server asks during the call goes to `asker` (none: refused)."""
        if self.credentials is not None:
            authorized = await self._authorized_call(name, exposed)
            if authorized is not None:
                return authorized
        for attempt in (1, 2):
            session = await self.session()
            try:
                # One deadline over the whole request (the SDK's own read timeout starts only after
                # the write, and its anyio cancel scope costs more); cancelling the call makes the
                # SDK send notifications/cancelled and keeps the session usable.
                with hard_deadline(timeout), self.asked.call(asker) as call:
                    result = await self._call(session, call, name, arguments, progress)
            except Exception as exc:
                inner = leaf(exc)
                if isinstance(inner, MCPError) and inner.error.code == types.URL_ELICITATION_REQUIRED:
                    raise url_required(self.key, exposed, inner.error) from None
                if isinstance(inner, MCPError) and inner.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
                    raise capability_missing(self.key, name, exposed, inner.error) from None
                if self.credentials is not None and await self.credentials.token() is None:
                    await self.reset()  # refused, and the refresh too: the user authorizes again
                    url = self.credentials.authorization_url()
                    raise authorization_required(self._shown, exposed, url) from None
                if is_session_lost(exc) and attempt == 1:
                    log.info("MCP server %r forgot the session; re-initialising", self.key)
                    await self.reset()
                    continue
                if is_connection_lost(exc) or is_session_lost(exc):
                    tail = self.stderr_tail()
                    await self.reset()
                    message = (
                        f"MCP server {self.key!r} closed the connection during the call to {name!r} "
                        "(it will be restarted on the next call)"
                    )
                    err = ToolExecutionError(f"{message}\nserver stderr (last lines):\n{tail}" if tail else message)
                    err.tool = exposed
                    raise err from None
                if is_timeout(leaf(exc)):
                    self._check_alive(session)
                raise self._request_error(exc, f"the call to {name!r}", exposed, timeout) from None
            if not isinstance(result, types.CallToolResult):
                raise ToolExecutionError(
                    f"MCP server {self.key!r} answered {name!r} with an unsupported result ({type(result).__name__})",
                    tool=exposed,
                )
            return result
        raise AssertionError("unreachable")

    async def _authorized_call(self, name: str, exposed: str | None) -> types.CallToolResult | None:
        """Before a call of a server its user authorizes: the -32042 link when there is no
        authorization (nothing is sent); the answer of `authorize` when it was listed in its stead
        and the user has authorized since (the server's own tools are listed again); else None."""
        assert self.credentials is not None
        if await self.credentials.token() is None:
            raise authorization_required(self._shown, exposed, self.credentials.authorization_url())
        if name == AUTHORIZE_TOOL and self.awaiting_authorization:
            if self._on_tools_changed is not None:
                self._on_tools_changed(self)
            text = f"Access to {self._shown!r} is authorized: list the tools again to see its own."
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        return None

    @property
    def _shown(self) -> str:
        """The server's id as its user named it (a user's server's key also names the user)."""
        try:
            parsed = parse_user_service_key(self.key)
        except ToolError:
            parsed = None
        return self.key if parsed is None else parsed[1]

    async def _call(
        self,
        session: ClientSession,
        call: CallInProgress,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressSink | None,
    ) -> Any:
        """The call, and in the 2026-07-28 era its rounds: a server that needs input returns
        `input_required`; its questions go to the call's client and the call is sent again with
        the answers (at most MAX_INPUT_ROUNDS times)."""
        report = None if progress is None else progress.areport
        deferred = None if call.asker is None else call.asker.deferred
        result = await session.call_tool(
            name,
            arguments,
            progress_callback=report,
            input_responses=None if deferred is None else deferred.responses,
            request_state=None if deferred is None else deferred.state,
            allow_input_required=True,
        )
        for _ in range(MAX_INPUT_ROUNDS):
            if not isinstance(result, types.InputRequiredResult):
                return result
            if deferred is not None:  # its client answers by retrying: the questions go back to it
                raise input_deferred(self.key, name, result)
            responses: dict[str, Any] | None = None
            if result.input_requests:
                responses = await self._answers(call, name, result.input_requests)
            else:
                await anyio.sleep(STATE_ONLY_WAIT)  # the server is working; it said to come back
            result = await session.call_tool(
                name,
                arguments,
                progress_callback=report,
                input_responses=responses,
                request_state=result.request_state,
                allow_input_required=True,
            )
        if isinstance(result, types.InputRequiredResult):
            raise ToolExecutionError(
                f"MCP server {self.key!r} still needed input for {name!r} after {MAX_INPUT_ROUNDS} rounds of answers"
            )
        return result

    async def _answers(self, call: CallInProgress, name: str, requests: dict[str, Any]) -> dict[str, Any]:
        """The client's answer to each of the server's input requests, in parallel."""
        answers: dict[str, Answer] = {}

        async def one(key: str, question: Question) -> None:
            answers[key] = await call.put(question)

        async with anyio.create_task_group() as tasks:
            for key, request in requests.items():
                if isinstance(request, (types.ElicitRequest, types.CreateMessageRequest, types.ListRootsRequest)):
                    tasks.start_soon(one, key, request)
                else:  # nothing the gateway knows how to ask
                    answers[key] = types.ErrorData(code=types.INVALID_REQUEST, message="Request not supported")
        for key, answer in answers.items():
            if isinstance(answer, types.ErrorData):
                raise input_needed(self.key, name, requests[key], answer)
        return dict(answers)

    def _check_alive(self, session: ClientSession) -> None:
        """After a call timed out: a server that answers a ping is only slow at that call (its
        other calls go on); one that answers nothing is restarted on the next use, in the
        background (the timed-out caller does not wait for the ping)."""
        if self._checking is not None and not self._checking.done():
            return
        self._checking = asyncio.get_running_loop().create_task(self._ping_or_reset(session))

    async def _ping_or_reset(self, session: ClientSession) -> None:
        try:
            with anyio.fail_after(PING_TIMEOUT):
                await session.send_ping()
            return
        except Exception as exc:
            if is_connection_lost(exc) or is_session_lost(exc) or self._session is not session:
                return  # gone already: the next use reconnects anyway
        log.warning("MCP server %r answered no ping after a call timed out: restarting it on the next use", self.key)
        self.unresponsive += 1
        await self.reset()

    def _request_error(self, exc: BaseException, what: str, tool: str | None, timeout: float) -> ToolError:
        inner = leaf(exc)
        if isinstance(inner, ToolError):
            return inner
        if is_timeout(inner):
            err: ToolError = ToolTimeoutError(
                f"MCP server {self.key!r} did not answer {what} within {timeout}s", tool=tool
            )
        else:
            err = ToolExecutionError(f"MCP server {self.key!r} failed {what}: {describe(inner)}", tool=tool)
        err.__cause__ = inner
        return err


class ListingTooLarge(Exception):
    """A listing past its caps."""


def give_back_memory() -> None:
    """Collect now and hand the freed pages back to the system (glibc's `malloc_trim`): a refused
    listing of 100,000 tools otherwise kept its hundreds of MB with the process for minutes."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:  # pragma: no cover
        return None


Era = Literal["legacy", "2026-07-28"]
Listable = Literal["tools", "prompts", "resources", "resource_templates"]
MODERN: Era = "2026-07-28"
# A 2026-07-28 call that needs input is sent again with the answers at most this many times (the
# SDK's own driver allows as many); a server that says only "come back" is asked again after this.
MAX_INPUT_ROUNDS = 10
STATE_ONLY_WAIT = 0.05
# How long `auto` waits for `server/discover` before taking a silent server for a legacy one
# (hand-written servers often drop methods they do not know instead of answering an error).
PROBE_TIMEOUT = 3.0
# The era each server answered with, by its configuration, for this process: a reconnect, a
# restarted server or another gateway never probes the same server twice. Bounded.
_ERAS: dict[str, Era] = {}
_MAX_ERAS = 4096


def _remember(identity: str, era: Era) -> None:
    if identity not in _ERAS and len(_ERAS) >= _MAX_ERAS:
        _ERAS.pop(next(iter(_ERAS)))
    _ERAS[identity] = era


def _names_modern(exc: MCPError) -> bool:
    """An UNSUPPORTED_PROTOCOL_VERSION error whose `supported` list names the modern era."""
    if exc.error.code != types.UNSUPPORTED_PROTOCOL_VERSION or not isinstance(exc.error.data, dict):
        return False
    supported = exc.error.data.get("supported")
    return isinstance(supported, list) and MODERN in supported


async def _probe(session: ClientSession, seconds: float) -> Era:
    """`server/discover` within `seconds`; any error or silence means the handshake era."""
    try:
        with anyio.fail_after(seconds):
            await session.discover()
        return MODERN
    except (MCPError, TimeoutError):
        pass
    try:
        await session.initialize()
    except MCPError as exc:
        # A slow server answered the probe after all and settled on the modern era: it says so.
        if not _names_modern(exc):
            raise
        await session.discover()
        return MODERN
    return "legacy"


def hard_deadline(seconds: float) -> contextlib.AbstractContextManager[Any]:
    """A timeout for one request on the gateway's own (asyncio) loop: the loop's calls share one
    timer (a timer per call, or anyio's cancel scope, costs more on every call); 3.10 falls back."""
    if sys.version_info >= (3, 11):
        return deadline(seconds)
    return anyio.fail_after(seconds)  # pragma: no cover


def _dispatcher_closed(session: ClientSession) -> bool:
    """The SDK marks its dispatcher closed once the transport reached EOF (server gone)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every upstream connection. An HTTP client made without one loads the
    CA bundle into a context of its own: about 900 KiB each, so a server connecting a thousand
    users' servers would hold 900 MB of copies of the same certificates."""
    return httpx2.create_ssl_context()


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncClient:
    """An upstream HTTP client as the SDK makes one (`create_mcp_http_client`, with its default
    timeouts), on the shared context."""
    if timeout is None:
        timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, verify=_tls(), transport=transport)


def _transport() -> httpx2.AsyncHTTPTransport:
    """The transport `httpx2.AsyncClient` makes by default, on the shared TLS context."""
    return httpx2.AsyncHTTPTransport(verify=_tls())


@contextlib.asynccontextmanager
async def _streamable_http(
    url: str,
    headers: dict[str, str],
    connect_timeout: float,
    transport: httpx2.AsyncBaseTransport,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[TransportStreams]:
    timeout = httpx2.Timeout(connect_timeout, read=300.0)
    async with (
        _http_client(headers=headers, timeout=timeout, transport=transport, auth=auth) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
