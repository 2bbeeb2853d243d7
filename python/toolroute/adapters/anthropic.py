"""Anthropic adapter: tool definitions for the Messages API, and `tool_use` -> `tool_result`,
for function tools and for Anthropic's native coding tools.

    tools = AnthropicTools(router, functions=["read_file", "write_file", "edit", "bash"],
                           native=["bash", "text_editor", "memory"], memory="/srv/memory/alice")
    message = client.messages.create(model=..., messages=messages, tools=tools.anthropic_tools(), ...)
    messages += [{"role": "assistant", "content": message.content}, tools.tool_result_message(message)]

Native tools (`native=`; docs/native.md): `bash` (`bash_20250124`: one shell for the
conversation, `cd` and exported variables carry over, `restart` starts afresh), `text_editor`
(`text_editor_20250728`, the tool named `str_replace_based_edit_tool`: view, create,
str_replace, insert), each run as the allowlist's own built-ins (`bash`; `read_file`,
`write_file`, `edit`), and `memory` (`memory_20250818`, `/memories` in the folder `memory=`
names, `_memory.MemoryTool`). Replies are in the native tools' own words.

Every `tool_use` gets exactly one `tool_result`; a name not served gets an `is_error` one.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
from typing_extensions import Unpack

from toolroute._twins import Body, Step, run_async, run_sync
from toolroute.adapters._anthropic_native import BashSession, NativeError, TextEditor
from toolroute.adapters._content import anthropic_content, outcome_parts, with_media
from toolroute.adapters._native import ANTHROPIC_CALLERS, checked_callers
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, OutcomeKind
from toolroute.errors import ToolError as RouterError
from toolroute.formats import to_anthropic
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter
from toolroute.toolsearch import is_search_tool

require("anthropic", "anthropic")

from anthropic.lib.tools import ToolError  # noqa: E402  (after the optional dependency's check)

from toolroute.adapters._memory import MemoryTool  # noqa: E402

if TYPE_CHECKING:
    from anthropic.types import Message, MessageParam, ToolParam, ToolResultBlockParam

NativeType = Literal["bash", "text_editor", "memory"]
EDITOR_NAME = "str_replace_based_edit_tool"
# The built-ins each native tool is.
BACKING: dict[str, tuple[str, ...]] = {
    "bash": ("bash",),
    "text_editor": ("read_file", "write_file", "edit"),
    "memory": (),
}


def _tool_uses(source: Any) -> list[Any]:
    """The `tool_use` blocks of a Message (or of an iterable of content blocks)."""
    blocks = source.content if hasattr(source, "content") else source
    return [block for block in blocks if getattr(block, "type", None) == "tool_use"]


def _result_block(block: Any, outcome: CallOutcome) -> ToolResultBlockParam:
    """The call's `tool_result`: its text, or (a result with media) its text, image and
    document blocks in order."""
    items = outcome_parts(outcome)
    content: Any = anthropic_content(items) if with_media(items) else outcome.text
    result: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": block.id, "content": content}
    if outcome.is_error:
        result["is_error"] = True
    return result


# The API's own tool search tools, by `tool_search` value.
SEARCH_TOOLS = {"bm25": "tool_search_tool_bm25", "regex": "tool_search_tool_regex"}


class AnthropicTools(ExposedTools):
    """An allowlist of router tools in Anthropic's shapes, native tools included."""

    def __init__(
        self,
        router: ToolRouter,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        native: Iterable[NativeType] = (),
        memory: str | os.PathLike[str] | MemoryTool | None = None,
        max_characters: int | None = None,
        allowed_callers: Sequence[str] | None = None,
        tool_search: Literal["client", "bm25", "regex"] = "client",
        **options: Unpack[RequestOptions],
    ) -> None:
        super().__init__(router, request, *positional, **options)
        if tool_search not in SEARCH_TOOLS and tool_search != "client":
            raise ValueError(f"tool_search must be client, bm25 or regex, not {tool_search!r}")
        # Deferred tools go to Claude marked `defer_loading`; a search finds them: toolroute's
        # own (`client`: its results are `tool_reference` blocks) or the API's (bm25, regex).
        self.tool_search = tool_search
        self.native: tuple[str, ...] = tuple(dict.fromkeys(native))
        for kind in self.native:
            if kind not in BACKING:
                raise ValueError(f"unknown native tool {kind!r}: expected one of {', '.join(BACKING)}")
            missing = [name for name in BACKING[kind] if name not in self]
            if missing:
                raise ValueError(f"the native {kind!r} tool is the {', '.join(missing)} built-in(s): expose them")
        if ("memory" in self.native) != (memory is not None):
            raise ValueError("the native memory tool needs memory= (the folder /memories names), and only it does")
        self.memory = memory if isinstance(memory, MemoryTool) or memory is None else _memory_tool(router, memory)
        self.max_characters = max_characters
        # Programmatic tool calling: who may call these tools ("direct", the model, or a code
        # execution tool version the provider runs); None leaves the provider's default.
        self.allowed_callers = checked_callers(allowed_callers, ANTHROPIC_CALLERS)
        self.session = BashSession(self)
        self.editor = TextEditor(self, max_characters)

    def anthropic_tools(self) -> list[ToolParam]:
        """`tools=` for `messages.create`: function tools `{name, description, input_schema}`
        (the `bash` function gives way to the native bash), then the native tools asked for."""
        provider_search = self.exposure.deferred and self.tool_search != "client"
        functions = [
            d
            for d in self.tool_definitions
            if not (d["function"]["name"] == "bash" and "bash" in self.native)
            and not (provider_search and is_search_tool(self.exposure.tools.get(d["function"]["name"])))
        ]
        tools: list[Any] = to_anthropic(functions)
        tools += [{**tool, "defer_loading": True} for tool in to_anthropic(self.exposure.deferred_definitions())]
        if provider_search:
            kind = SEARCH_TOOLS[self.tool_search]
            tools.append({"type": f"{kind}_20251119", "name": kind})
        if "bash" in self.native:
            tools.append({"type": "bash_20250124", "name": "bash"})
        if "text_editor" in self.native:
            editor: dict[str, Any] = {"type": "text_editor_20250728", "name": EDITOR_NAME}
            if self.max_characters is not None:
                editor["max_characters"] = self.max_characters
            tools.append(editor)
        if "memory" in self.native:
            tools.append({"type": "memory_20250818", "name": "memory"})
        if self.allowed_callers is not None:
            tools = [{**tool, "allowed_callers": list(self.allowed_callers)} for tool in tools]
        return tools

    def _answer(self, block: Any, approved: Collection[str]) -> Body[ToolResultBlockParam]:
        name, arguments = block.name, block.input
        door = self.approving() if block.id in approved else self
        native: Body[str | CallOutcome] | None = None
        if name == "bash" and "bash" in self.native:
            native = self.session.run(arguments, door)
        elif name == EDITOR_NAME and "text_editor" in self.native:
            native = TextEditor(door, self.max_characters).run(arguments)
        elif name == "memory" and self.memory is not None:
            if block.id not in approved and self.memory_needs_approval(arguments):
                return _result_block(block, CallOutcome(MEMORY_HELD, OutcomeKind.APPROVAL_NEEDED))
            native = _memory(self.memory, arguments)
        if native is None:
            outcome: CallOutcome = yield Step(door.execute, door.aexecute, (name, arguments))
            if not outcome.is_error and is_search_tool(self.exposure.tools.get(name)):
                return _references(block, outcome)
            return _result_block(block, outcome)
        try:
            answer = yield from native
        except (NativeError, ToolError) as exc:
            return _result_block(block, CallOutcome(str(exc), OutcomeKind.FAILED))
        # A view of an image or a PDF answers with read_file's own outcome (its blocks).
        return _result_block(block, answer if isinstance(answer, CallOutcome) else CallOutcome(answer))

    def tool_results(
        self, source: Message | Iterable[Any], *, approved: Collection[str] = ()
    ) -> list[ToolResultBlockParam]:
        """Run every `tool_use` block in order; one `tool_result` block per call. A call that
        needs approval (`pending_approvals`) runs only if its id is in `approved`."""
        return [run_sync(self._answer(block, approved)) for block in _tool_uses(source)]

    async def atool_results(
        self, source: Message | Iterable[Any], *, approved: Collection[str] = ()
    ) -> list[ToolResultBlockParam]:
        return [await run_async(self._answer(block, approved)) for block in _tool_uses(source)]

    def tool_result_message(self, source: Message | Iterable[Any], *, approved: Collection[str] = ()) -> MessageParam:
        """The `user` turn that answers the assistant's tool calls."""
        return {"role": "user", "content": self.tool_results(source, approved=approved)}

    async def atool_result_message(
        self, source: Message | Iterable[Any], *, approved: Collection[str] = ()
    ) -> MessageParam:
        return {"role": "user", "content": await self.atool_results(source, approved=approved)}

    def pending_approvals(self, source: Message | Iterable[Any]) -> list[dict[str, Any]]:
        """The `tool_use` blocks that wait for a person's approval: `{"id", "name", "input"}`
        each. Ask, then pass the approved ids to `tool_results` (the others are refused). A
        native tool's call is asked about as the built-in it runs."""
        pending = []
        for block in _tool_uses(source):
            if block.name == "memory" and self.memory is not None and block.name not in self:
                held = self.memory_needs_approval(block.input)
            else:
                backing = BACKING.get(_native_kind(block.name), ()) if block.name not in self else (block.name,)
                held = any(self.needs_approval(name, block.input) for name in backing)
            if held:
                pending.append({"id": block.id, "name": block.name, "input": block.input})
        return pending

    def memory_needs_approval(self, arguments: Any) -> bool:
        """Whether a native memory command waits for a person, by the same rule as the other
        tools: `True` holds what writes (every command but `view`), a collection of names holds
        every command when it names `memory`, a callable is asked with `("memory", input)`."""
        rule = self.approval_rule
        if rule is False:
            return False
        command = arguments.get("command") if isinstance(arguments, Mapping) else None
        if rule is True:
            return command != "view"
        if callable(rule):
            return bool(rule("memory", arguments if isinstance(arguments, Mapping) else {}))
        return "memory" in rule

    def close(self) -> None:
        """End the conversation's shell (the router ends it too, when it closes)."""
        run_sync(self.session.stop())

    async def aclose(self) -> None:
        await run_async(self.session.stop())


def _references(block: Any, outcome: CallOutcome) -> ToolResultBlockParam:
    """toolroute's search answered for Claude: one `tool_reference` block per tool found (the
    API then loads their deferred definitions), or the text when nothing was found."""
    found = outcome.trace.get("found") if isinstance(outcome.trace, dict) else None
    if not found:
        return _result_block(block, outcome)
    references: list[Any] = [{"type": "tool_reference", "tool_name": name} for name in found]
    return {"type": "tool_result", "tool_use_id": block.id, "content": references}


def _native_kind(name: str) -> str:
    """The native type a tool_use block's name stands for ("" for none)."""
    return {"bash": "bash", EDITOR_NAME: "text_editor", "memory": "memory"}.get(name, "")


MEMORY_HELD = "memory needs a person's approval before it runs"


def _memory_tool(router: ToolRouter, folder: str | os.PathLike[str]) -> MemoryTool:
    """The memory tool of `memory=`: an absolute folder as given; a relative one beneath the
    router's workspace (never the process's current folder), refused where it would lead out."""
    path = Path(folder)
    if path.is_absolute():
        return MemoryTool(path)
    try:
        context = router.builtin_context("memory")
    except RouterError:
        raise ValueError(
            f"memory={str(folder)!r} is relative and the router has no workspace to put it in: "
            "give an absolute folder, or create the router with context=..."
        ) from None
    try:
        tool = MemoryTool(context.resolve(str(path), write=True))
        # Checked again once made: a symlink swapped in while the folder was created leads nowhere.
        context.resolve(str(tool.context.workspace), write=True)
    except RouterError as exc:
        raise ValueError(f"memory={str(folder)!r} leads out of the workspace: {exc}") from None
    return tool


def _memory(memory: MemoryTool, arguments: Any) -> Body[str]:
    """One memory command, on a worker thread when async (it touches the disk)."""
    result = yield Step(memory.call, _in_thread(memory.call), (arguments,))
    return str(result)


def _in_thread(fn: Any) -> Any:
    async def run(*args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    return run


__all__ = ["AnthropicTools", "MemoryTool", "NativeType"]
