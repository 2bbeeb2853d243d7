"""The two pages a user's browser sees: the connect page, then the callback.

The connect page (`/oauth/connect?user=U&server=S`, the link of the -32042 answer) is completed
only by the tenant it names: it asks for that tenant's own credentials the standard way (an HTTP
401 challenge: Basic with the user id and an API key, or Bearer with an API key or a JWT of the
identity provider), then begins a flow and redirects to the authorization server. The callback
(`/oauth/callback`) ends the flow its `state` names; what it refuses stores nothing. Neither page
shows a token or echoes what it was sent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import html
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from toolroute.serve.upstream_oauth.credentials import (
    CALLBACK_PATH,
    CONNECT_PATH,
    Authorizations,
    FlowRefused,
    state_digest,
)
from toolroute.serve.upstream_oauth.protocol import OAuthProblem

log = logging.getLogger("toolroute.serve")

# A verified bearer's user id, or None (the served endpoint's own verifiers).
Verify = Callable[[str], Awaitable[Any]]
CHALLENGE = 'Basic realm="toolroute", charset="UTF-8", Bearer realm="toolroute"'
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def routes(authorizations: Authorizations, verify: Verify) -> list[Route]:
    async def connect(request: Request) -> Response:
        user_id, server_id = request.query_params.get("user"), request.query_params.get("server")
        if not user_id or not server_id:
            return PlainTextResponse("the link names no user and server", status_code=400, headers=NO_STORE)
        who = await _tenant(request, verify)
        if who is None:
            return PlainTextResponse(
                "sign in as the user this link was made for",
                status_code=401,
                headers={**NO_STORE, "WWW-Authenticate": CHALLENGE},
            )
        if who != user_id:
            log.warning("user %r opened user %r's authorization link: refused", who, user_id)
            return PlainTextResponse("this link was made for another user", status_code=403, headers=NO_STORE)
        try:
            where = await authorizations.begin(user_id, server_id)
        except (FlowRefused, OAuthProblem) as exc:
            return PlainTextResponse(f"cannot authorize: {exc}", status_code=400, headers=NO_STORE)
        return RedirectResponse(where, status_code=302, headers=NO_STORE)

    async def callback(request: Request) -> Response:
        params = request.query_params
        state, code = params.get("state"), params.get("code")
        if params.get("error") or not state or not code:
            # A refusal still ends its flow: its state is not left to be used later.
            if state:
                await _drop(authorizations, state)
            return PlainTextResponse("the authorization was not granted", status_code=400, headers=NO_STORE)
        try:
            _, server_id = await authorizations.complete(state, code, params.get("iss"))
        except FlowRefused as exc:
            log.warning("an OAuth callback was refused: %s", exc)
            return PlainTextResponse(f"authorization failed: {exc}", status_code=400, headers=NO_STORE)
        page = (
            f"<!doctype html><title>Authorized</title><p>Access to <b>{html.escape(server_id)}</b> is "
            "authorized. You may close this page and try again.</p>"
        )
        return HTMLResponse(page, headers=NO_STORE)

    return [Route(CONNECT_PATH, connect, methods=["GET"]), Route(CALLBACK_PATH, callback, methods=["GET"])]


async def _drop(authorizations: Authorizations, state: str) -> None:
    await asyncio.to_thread(authorizations.store.take_oauth_flow, state_digest(state))


async def _tenant(request: Request, verify: Verify) -> str | None:
    """The tenant the request's credentials prove, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if scheme == "bearer" and value:
        token = await verify(value)
        return None if token is None else str(token.subject)
    if scheme == "basic" and value:
        try:
            user, _, key = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        token = await verify(key)
        subject = None if token is None else str(token.subject)
        return subject if subject == user else None
    return None
