"""One body for an operation with a sync and an async form; only the awaited calls are twinned.

As httpx's clients share request building and redirects and twin only the send, an operation
here is written once, as a generator that yields each call that would block (a `Step`: the
blocking form, the awaitable form, and their arguments) and receives its result. `run_sync`
drives it calling the blocking forms; `run_async` awaits the other forms. An exception raised by
a step is thrown into the body at the `yield`, so the body's own `try` blocks see it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Step(Generic[T]):
    """One call of the body that may block: `blocking(*args)` or `await awaited(*args)`."""

    blocking: Callable[..., T]
    awaited: Callable[..., Awaitable[T]]
    args: tuple[Any, ...] = ()


Body = Generator[Step[Any], Any, R]


def run_sync(body: Body[R]) -> R:
    """Drive `body`, making each step's blocking call in this thread."""
    try:
        step = next(body)
        while True:
            try:
                result = step.blocking(*step.args)
            except BaseException as exc:
                step = body.throw(exc)
            else:
                step = body.send(result)
    except StopIteration as done:
        value: R = done.value
        return value


async def run_async(body: Body[R]) -> R:
    """Drive `body`, awaiting each step's awaitable form."""
    try:
        step = next(body)
        while True:
            try:
                result = await step.awaited(*step.args)
            except BaseException as exc:
                step = body.throw(exc)
            else:
                step = body.send(result)
    except StopIteration as done:
        value: R = done.value
        return value
