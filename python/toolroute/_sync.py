"""Run a coroutine from synchronous code, whether or not this thread already runs an event loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


def run_coroutine_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """`asyncio.run` when no loop runs here; otherwise a fresh loop on a helper thread, so a sync
    call made from inside a running loop blocks only that call instead of deadlocking."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_as_coroutine(factory))
    result: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def runner() -> None:
        try:
            result["value"] = ctx.run(asyncio.run, _as_coroutine(factory))
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=runner, name="toolroute-sync-bridge", daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return cast(T, result["value"])


async def _as_coroutine(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()
