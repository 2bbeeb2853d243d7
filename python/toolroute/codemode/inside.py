"""The program's side of code mode: runs inside the sandbox, never imported by the host.

The host starts `python -I -c <this file's text>` with the program on stdin, and two pipe ends
named by TOOLROUTE_CODE_CHANNEL ("read_fd,write_fd"). The first line the host sends is the
catalogue (python name -> exposed name, description, JSON schema of the arguments); every later
line answers one call. Each callable tool becomes a function under its python name, a global of
the program and importable from the module `tools` (`tools.aio` holds the async forms). Only
the standard library is used: the interpreter may not be the host's.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import sys
import threading
import types
from collections.abc import Callable, Coroutine
from typing import Any

CHANNEL_VARIABLE = "TOOLROUTE_CODE_CHANNEL"


class ToolError(Exception):
    """A tool call that failed: `kind` is the error's kind (e.g. ToolArgumentError, DENIED)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def _value(text: str) -> Any:
    """A result as a Python value: parsed JSON where the tool returned JSON, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._incoming = os.fdopen(read_fd, "rb")
        self._write_fd = write_fd
        self._write_lock = threading.Lock()
        self._slots: dict[int, list[Any]] = {}
        self._slots_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False

    def catalogue(self) -> dict[str, dict[str, str]]:
        line = self._incoming.readline()
        if not line:
            raise SystemExit("toolroute: the host closed the tool channel before the catalogue")
        catalogue: dict[str, dict[str, str]] = json.loads(line)
        return catalogue

    def serve(self) -> None:
        threading.Thread(target=self._read, name="toolroute-replies", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._incoming:
                reply = json.loads(line)
                with self._slots_lock:
                    slot = self._slots.pop(reply.get("id"), None)
                if slot is not None:
                    slot[1] = reply
                    slot[0].set()
        finally:
            with self._slots_lock:
                self._closed = True
                waiting, self._slots = list(self._slots.values()), {}
            for slot in waiting:
                slot[0].set()

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        ident = next(self._ids)
        # Encoded first: arguments that JSON cannot carry fail here, leaving nothing waiting.
        line = (json.dumps({"id": ident, "name": name, "arguments": arguments}, ensure_ascii=False) + "\n").encode()
        slot: list[Any] = [threading.Event(), None]
        with self._slots_lock:
            if self._closed:
                raise ToolError("ChannelClosed", "the host closed the tool channel")
            self._slots[ident] = slot
        with self._write_lock:
            view = memoryview(line)
            while view:
                view = view[os.write(self._write_fd, view) :]
        slot[0].wait()
        reply = slot[1]
        if reply is None:
            raise ToolError("ChannelClosed", "the host closed the tool channel (the call was not answered)")
        if reply.get("ok"):
            return _value(reply["text"])
        raise ToolError(reply.get("kind", "ToolError"), reply.get("message", ""))


def _function(channel: _Channel, exposed: str, python_name: str, entry: dict[str, str]) -> Callable[..., Any]:
    def call(**arguments: Any) -> Any:
        return channel.call(exposed, arguments)

    call.__name__ = call.__qualname__ = python_name
    call.__doc__ = entry.get("doc") or None
    return call


def _async_function(function: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    async def call(**arguments: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(function, **arguments))

    call.__name__ = call.__qualname__ = function.__name__
    call.__doc__ = function.__doc__
    return call


def _modules(
    channel: _Channel, catalogue: dict[str, dict[str, str]]
) -> tuple[types.ModuleType, dict[str, Callable[..., Any]]]:
    tools = types.ModuleType("tools", "The tools this request may call; each returns the tool's result.")
    aio = types.ModuleType("tools.aio", "The same tools as coroutines (await them, e.g. with asyncio.gather).")
    functions: dict[str, Callable[..., Any]] = {}
    for python_name, entry in catalogue.items():
        function = _function(channel, entry["name"], python_name, entry)
        functions[python_name] = function
        setattr(tools, python_name, function)
        setattr(aio, python_name, _async_function(function))

    def call(name: str, /, **arguments: Any) -> Any:
        """Call a tool by its exposed name (for names that are not Python identifiers)."""
        return channel.call(name, arguments)

    for module, names in ((tools, {**functions, "call": call, "ToolError": ToolError, "aio": aio}), (aio, {})):
        for attribute, value in names.items():
            setattr(module, attribute, value)
    tools.__all__ = [*functions, "call", "ToolError"]  # type: ignore[attr-defined]
    aio.__all__ = list(functions)  # type: ignore[attr-defined]
    sys.modules["tools"], sys.modules["tools.aio"] = tools, aio
    return tools, functions


def main() -> None:
    read_fd, write_fd = (int(fd) for fd in os.environ.pop(CHANNEL_VARIABLE).split(","))
    source = sys.stdin.buffer.read().decode("utf-8", "replace")
    sys.stdin = open(os.devnull)  # noqa: SIM115  # the program's stdin: nothing to read
    channel = _Channel(read_fd, write_fd)
    tools, functions = _modules(channel, channel.catalogue())
    channel.serve()
    sys.argv = ["<program>"]
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # what a killed program printed still arrives
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "tools": tools, **functions}
    code = compile(source, "<program>", "exec")
    del source
    exec(code, namespace)  # running the model's program is this file's one job


if __name__ == "__main__":  # `python -c` runs it as __main__; an import does nothing
    main()
