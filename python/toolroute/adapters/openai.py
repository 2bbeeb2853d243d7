"""OpenAI adapter: tool definitions for Chat Completions and the Responses API, and the items
that answer every one of a model's tool calls, function calls and native tool types alike.

    tools = OpenAITools(router, functions=["read_file", "apply_patch", "bash"], native=["apply_patch", "shell"])
    response = client.responses.create(model=..., input=items, tools=tools.responses_tools())
    items += [*response.output, *tools.call_outputs(response)]

Native types (`native=`), each standing in for the built-in it is (docs/native.md):
`apply_patch` (V4A operations, `apply_patch_call`) and `custom_apply_patch` (Codex's freeform
form, `custom_tool_call` whose input is the whole patch) for `apply_patch`; `shell`
(`shell_call`, several commands) and `local_shell` (`local_shell_call`, an argv) for `bash`.

A native call runs whenever its built-in is exposed (`native=` chooses what is declared; the
allowlist decides what runs). Every call item of a response gets exactly one answer, in order:
a call the allowlist does not serve gets an error in its own type's output item, never silence
(the next request would then fail far from the cause); a client-side type with no output form
for an error (`computer_call`) raises `UnansweredCall` naming it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from typing_extensions import Unpack

from toolroute._twins import Body, Step, run_async, run_sync
from toolroute.adapters._content import (
    chat_media_message,
    chat_split,
    error_marked,
    outcome_parts,
    responses_output,
    with_media,
)
from toolroute.adapters._native import (
    OPENAI_CALLERS,
    PatchOperation,
    apply_operations,
    argv_command,
    capped,
    checked_callers,
    local_shell_output,
    run_command,
)
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, OutcomeKind, model_text
from toolroute.formats import namespace_name, to_responses
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter
from toolroute.toolsearch import is_search_tool

require("openai", "openai")

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessage,
        ChatCompletionMessageToolCallUnion,
        ChatCompletionToolMessageParam,
        ChatCompletionToolParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.responses import Response, ToolParam

    ToolCallSource = ChatCompletion | ChatCompletionMessage | Iterable[ChatCompletionMessageToolCallUnion]
    # A call's tool message, and the content parts of its media for the user message after.
    ChatAnswer = tuple[ChatCompletionToolMessageParam, list[dict[str, Any]]]
    ChatMessage = ChatCompletionToolMessageParam | ChatCompletionUserMessageParam

NativeType = Literal["apply_patch", "custom_apply_patch", "shell", "local_shell"]
# The built-in each native type is.
BACKING: dict[str, str] = {
    "apply_patch": "apply_patch",
    "custom_apply_patch": "apply_patch",
    "shell": "bash",
    "local_shell": "bash",
}
CUSTOM_PATCH_DESCRIPTION = (
    "Apply a patch in the Codex format, the whole patch as the input: '*** Begin Patch', then "
    "'*** Add File: <path>' with '+' lines, '*** Delete File: <path>', or '*** Update File: <path>' "
    "with '@@' hunks of ' ' context, '-' removed and '+' added lines; then '*** End Patch'. All files "
    "change, or none."
)
# Items the API runs itself (or that are not calls): nothing for the host to answer.
SERVER_SIDE = frozenset(
    {
        "message",
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "tool_search_call",
        "tool_search_output",
        "compaction",
    }
)


class UnansweredCall(RuntimeError):
    """A client-side call the adapter cannot run and cannot answer with an error item."""


def _tool_calls(source: Any) -> list[Any]:
    """The tool calls of a completion (first choice), a message, or an iterable of calls."""
    if hasattr(source, "choices"):
        source = source.choices[0].message if source.choices else None
    if source is None:
        return []
    if hasattr(source, "tool_calls"):
        return list(source.tool_calls or [])
    return list(source)


def _items(response: Any) -> list[Any]:
    """The output items of a Responses API response (or an iterable of items)."""
    return list(response.output if hasattr(response, "output") else response)


def _get(item: Any, key: str, default: Any = None) -> Any:
    """A field of an SDK model or of a plain dict (items may come back either way)."""
    return item.get(key, default) if isinstance(item, dict) else getattr(item, key, default)


class OpenAITools(ExposedTools):
    """An allowlist of router tools in OpenAI's shapes, native tool types included."""

    def __init__(
        self,
        router: ToolRouter,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        native: Iterable[NativeType] = (),
        allowed_callers: Sequence[str] | None = None,
        tool_search: Literal["server", "client", "items"] = "server",
        namespaces: bool = False,
        **options: Unpack[RequestOptions],
    ) -> None:
        super().__init__(router, request, *positional, **options)
        if tool_search not in ("server", "client", "items"):
            raise ValueError(f"tool_search must be server, client or items, not {tool_search!r}")
        # Responses: deferred functions go marked `defer_loading` beside the hosted `tool_search`
        # (server); or stay out behind toolroute's search, offered as the API's `tool_search`
        # executed by the client (items: the model sends `tool_search_call` items, answered with
        # `tool_search_output` items that load what was found) or as the search_tools function
        # (client, and Chat Completions always).
        self.tool_search = tool_search
        # Responses: the tools of each MCP server or local service grouped under a namespace
        # (`{"type": "namespace"}`, as OpenAI advises for large catalogues); calls keep the
        # exposed names, so a namespaced call routes as any other.
        self.namespaces = namespaces
        self.native: tuple[str, ...] = tuple(dict.fromkeys(native))
        # Responses' programmatic tool calling: who may call these tools ("direct", the model;
        # "programmatic", code the provider runs); None leaves the provider's default.
        self.allowed_callers = checked_callers(allowed_callers, OPENAI_CALLERS)
        for kind in self.native:
            if kind not in BACKING:
                raise ValueError(f"unknown native tool type {kind!r}: expected one of {', '.join(BACKING)}")
            if BACKING[kind] not in self:
                raise ValueError(f"the native {kind!r} tool type is the {BACKING[kind]!r} built-in: expose it")
        if {"apply_patch", "custom_apply_patch"} <= set(self.native):
            raise ValueError("apply_patch is either the native apply_patch type or the custom one, not both")

    # ---- declarations -------------------------------------------------------------------

    def chat_tools(self) -> list[ChatCompletionToolParam]:
        """`tools=` for `chat.completions.create` (strict mode off: it would make every field
        required); with `custom_apply_patch`, apply_patch as a freeform custom tool."""
        tools: list[Any] = [
            {"type": "function", "function": dict(fn)}
            for name, fn in self.definitions.items()
            if not self._custom(name)
        ]
        if "custom_apply_patch" in self.native:
            tools.append({"type": "custom", "custom": {"name": "apply_patch", "description": CUSTOM_PATCH_DESCRIPTION}})
        return tools

    def responses_tools(self) -> list[ToolParam]:
        """`tools=` for `responses.create`: function tools (`strict` true only for schemas strict
        mode takes as they are, see `toolroute.formats.strict_eligible`), then the native types
        asked for, each in place of its built-in's function."""
        replaced = {BACKING[kind] for kind in self.native}
        search_mode = self.tool_search if self.exposure.deferred else None
        search = [d for d in self.tool_definitions if d["function"]["name"] == self._search_name()]
        if search_mode in ("server", "items"):
            replaced |= {d["function"]["name"] for d in search}
        functions = [d for d in self.tool_definitions if d["function"]["name"] not in replaced]
        tools: list[Any] = to_responses(functions)
        if search_mode == "server":
            tools += [{**t, "defer_loading": True} for t in to_responses(self.exposure.deferred_definitions())]
            tools.append({"type": "tool_search"})
        elif search_mode == "items" and search:
            fn = search[0]["function"]
            tools.append(
                {
                    "type": "tool_search",
                    "execution": "client",
                    "description": fn.get("description", ""),
                    "parameters": fn.get("parameters", {}),
                }
            )
        for kind in self.native:
            if kind == "custom_apply_patch":
                tools.append({"type": "custom", "name": "apply_patch", "description": CUSTOM_PATCH_DESCRIPTION})
            else:
                tools.append({"type": kind})
        if self.allowed_callers is not None:
            tools = [{**tool, "allowed_callers": list(self.allowed_callers)} for tool in tools]
        return self._grouped(tools) if self.namespaces else tools

    def _grouped(self, tools: list[Any]) -> list[Any]:
        """Function tools of one service under one namespace, where the first of them stood."""
        out: list[Any] = []
        groups: dict[str, dict[str, Any]] = {}
        for tool in tools:
            service = self.exposure.namespaces.get(tool.get("name", "")) if tool.get("type") == "function" else None
            if service is None:
                out.append(tool)
                continue
            name = namespace_name(service)
            if name not in groups:
                groups[name] = {
                    "type": "namespace",
                    "name": name,
                    "description": f"Tools of the {service} server.",
                    "tools": [],
                }
                out.append(groups[name])
            groups[name]["tools"].append(tool)
        return out

    def _search_name(self) -> str | None:
        """The name of the request's search tool (toolroute's search over its deferred tools)."""
        return next((n for n, t in self.exposure.tools.items() if is_search_tool(t)), None)

    def _custom(self, name: str) -> bool:
        return name == "apply_patch" and "custom_apply_patch" in self.native

    # ---- Chat Completions ---------------------------------------------------------------

    def _door(self, call_id: Any, approved: Collection[str]) -> OpenAITools:
        """The door a call runs through: approved by a person, or as the allowlist holds it."""
        return self.approving() if call_id in approved else self

    def _chat_answer(self, call: Any, approved: Collection[str]) -> Body[ChatAnswer]:
        kind = getattr(call, "type", "function")
        door = self._door(call.id, approved)
        if kind == "function":
            outcome: CallOutcome = yield Step(
                door.execute, door.aexecute, (call.function.name, call.function.arguments)
            )
        elif kind == "custom":
            outcome = yield from door._custom_call(call.custom.name, call.custom.input)
        else:
            outcome = CallOutcome(f"tool call type {kind!r} is not served here", OutcomeKind.NOT_FOUND)
        items = outcome_parts(outcome)
        if not with_media(items):
            return {"role": "tool", "tool_call_id": call.id, "content": model_text(outcome)}, []
        text, media = chat_split(error_marked(items, outcome))
        return {"role": "tool", "tool_call_id": call.id, "content": text}, media

    def tool_messages(self, source: ToolCallSource, *, approved: Collection[str] = ()) -> list[ChatMessage]:
        """Run every tool call of `source` (a ChatCompletion, its message, or the calls), in order;
        returns one `tool` message per call, errors included as text. A call that needs approval
        (`pending_approvals`) runs only if its id is in `approved`. Tool messages carry text only:
        the images, audio and PDFs of the results follow in one `user` message after them (each
        marked in its tool message's text), the last of the list."""
        return _media_after([run_sync(self._chat_answer(call, approved)) for call in _tool_calls(source)])

    async def atool_messages(self, source: ToolCallSource, *, approved: Collection[str] = ()) -> list[ChatMessage]:
        return _media_after([await run_async(self._chat_answer(call, approved)) for call in _tool_calls(source)])

    def pending_approvals(self, source: Any) -> list[dict[str, Any]]:
        """The calls of a ChatCompletion (or its message, or its calls) or of a Responses API
        response that wait for a person's approval: `{"call_id", "name", "arguments"}` each. Ask,
        then pass the approved ids to `tool_messages` or `call_outputs` (the others are refused)."""
        items = _items(source) if hasattr(source, "output") else None
        pending = []
        for item in items if items is not None else _tool_calls(source):
            name, arguments, call_id = _call_parts(item)
            if name is not None and self.needs_approval(name, arguments):
                pending.append({"call_id": call_id, "name": name, "arguments": arguments})
        return pending

    # ---- Responses API ------------------------------------------------------------------

    def call_outputs(
        self, response: Response | Iterable[Any], *, all_or_nothing: bool = False, approved: Collection[str] = ()
    ) -> list[Any]:
        """Run every call item of a Responses API response, in order; returns one input item
        answering each (matched by `call_id`). With `all_or_nothing`, the response's
        `apply_patch_call`s are applied together: all of them, or (one failing) none. A call that
        needs approval (`pending_approvals`) runs only if its id is in `approved`."""
        return run_sync(self._answers(_items(response), all_or_nothing, approved))

    async def acall_outputs(
        self, response: Response | Iterable[Any], *, all_or_nothing: bool = False, approved: Collection[str] = ()
    ) -> list[Any]:
        return await run_async(self._answers(_items(response), all_or_nothing, approved))

    # The name of the first release, which answered function calls alone: it answers all now.
    function_call_outputs = call_outputs
    afunction_call_outputs = acall_outputs

    def _answers(self, items: list[Any], all_or_nothing: bool, approved: Collection[str]) -> Body[list[Any]]:
        patches = [item for item in items if _get(item, "type") == "apply_patch_call"]
        together: dict[str, Any] = {}
        if all_or_nothing and len(patches) > 1:
            # One transaction: approved as a whole only when every one of its calls is.
            whole = all(_get(item, "call_id") in approved for item in patches)
            door = self.approving() if whole else self
            together = yield from door._patches_together(patches)
        answers = []
        for item in items:
            kind = _get(item, "type")
            if kind == "tool_search_call" and _get(item, "execution") == "client":
                answers.append((yield from self._tool_search(item)))
                continue
            if kind in SERVER_SIDE or kind is None:
                continue
            call_id = _get(item, "call_id")
            if kind == "apply_patch_call" and call_id in together:
                answers.append(together[call_id])
            else:
                answers.append((yield from self._door(call_id, approved)._answer(item, kind)))
        return answers

    def _answer(self, item: Any, kind: str) -> Body[Any]:
        call_id = _get(item, "call_id")
        if kind == "function_call":
            outcome: CallOutcome = yield Step(
                self.execute, self.aexecute, (_get(item, "name"), _get(item, "arguments"))
            )
            return {"type": "function_call_output", "call_id": call_id, "output": _responses_output(outcome)}
        if kind == "custom_tool_call":
            outcome = yield from self._custom_call(_get(item, "name"), _get(item, "input"))
            return {"type": "custom_tool_call_output", "call_id": call_id, "output": _responses_output(outcome)}
        if kind == "apply_patch_call":
            operation = PatchOperation.of(_get(item, "operation"))
            outcome = yield from apply_operations(self, [operation])
            return _patch_output(call_id, outcome, operation.done())
        if kind == "shell_call":
            return (yield from self._shell(item, call_id))
        if kind == "local_shell_call":
            return (yield from self._local_shell(item, call_id))
        raise UnansweredCall(
            f"the response holds a {kind!r} item (call {call_id!r}), which toolroute cannot run and has no "
            "error form to answer with; answer it yourself or do not offer that tool"
        )

    def _tool_search(self, item: Any) -> Body[Any]:
        """A client-executed `tool_search_call`: toolroute's search over the request's deferred
        tools, answered with the definitions found, which the API then loads."""
        name = self._search_name()
        answer: dict[str, Any] = {
            "type": "tool_search_output",
            "call_id": _get(item, "call_id"),
            "execution": "client",
            "status": "completed",
            "tools": [],
        }
        if name is None:
            return {**answer, "status": "incomplete"}
        arguments = _get(item, "arguments")
        outcome: CallOutcome = yield Step(self.execute, self.aexecute, (name, arguments))
        found = outcome.trace.get("found") if isinstance(outcome.trace, dict) else None
        if outcome.is_error:
            return {**answer, "status": "incomplete"}
        tools = [self.exposure.tools[n] for n in found or () if n in self.exposure.tools]
        loaded = to_responses([t.definition() for t in tools])
        answer["tools"] = self._grouped(loaded) if self.namespaces else loaded
        return answer

    def _custom_call(self, name: str, text: str) -> Body[CallOutcome]:
        if name != "apply_patch":
            return CallOutcome(f"custom (freeform) tool {name!r} is not served here", OutcomeKind.NOT_FOUND)
        outcome: CallOutcome = yield Step(self.execute, self.aexecute, ("apply_patch", {"patch": text}))
        return outcome

    def _patches_together(self, patches: list[Any]) -> Body[dict[str, Any]]:
        """One transaction for every `apply_patch_call` of a response; the answer of each."""
        operations = [PatchOperation.of(_get(item, "operation")) for item in patches]
        outcome = yield from apply_operations(self, operations)
        answers = {}
        for item, operation in zip(patches, operations, strict=True):
            call_id = _get(item, "call_id")
            if outcome.is_error:
                why = f"{outcome.text} (the response's {len(patches)} operations are applied together: none was)"
                answers[call_id] = _patch_output(call_id, CallOutcome(why, outcome.kind), "")
            else:
                answers[call_id] = _patch_output(call_id, outcome, operation.done())
        return answers

    def _shell(self, item: Any, call_id: str) -> Body[Any]:
        action = _get(item, "action")
        commands = list(_get(action, "commands") or [])
        limit = _get(action, "max_output_length")
        timeout_ms = _get(action, "timeout_ms")
        outputs = []
        for command in commands:
            run = yield from run_command(self, command, timeout=None if timeout_ms is None else timeout_ms / 1000)
            outcome: dict[str, Any] = (
                {"type": "timeout"} if run.timed_out else {"type": "exit", "exit_code": run.exit_code}
            )
            outputs.append(
                {"stdout": capped(run.stdout, limit), "stderr": capped(run.stderr, limit), "outcome": outcome}
            )
        answer: dict[str, Any] = {"type": "shell_call_output", "call_id": call_id, "output": outputs}
        if limit is not None:
            answer["max_output_length"] = limit  # passed back with the raw output, as the API asks
        return answer

    def _local_shell(self, item: Any, call_id: str) -> Body[Any]:
        action = _get(item, "action")
        timeout_ms = _get(action, "timeout_ms")
        run = yield from run_command(
            self,
            argv_command(list(_get(action, "command") or []), _get(action, "env")),
            timeout=None if timeout_ms is None else timeout_ms / 1000,
            cwd=_get(action, "working_directory"),
        )
        return {"type": "local_shell_call_output", "id": call_id, "output": local_shell_output(run)}


def _call_parts(item: Any) -> tuple[str | None, Any, Any]:
    """(the built-in or function it runs, its arguments, its call id) of a call of any kind."""
    kind = _get(item, "type", "function")
    function = _get(item, "function")
    if function is not None:  # a Chat Completions tool call
        return _get(function, "name"), _get(function, "arguments"), _get(item, "id")
    call_id = _get(item, "call_id")
    if kind == "function_call":
        return _get(item, "name"), _get(item, "arguments"), call_id
    if kind in ("custom", "custom_tool_call"):
        custom = _get(item, "custom", item)
        return _get(custom, "name"), {"patch": _get(custom, "input")}, call_id
    if kind == "apply_patch_call":
        return "apply_patch", {"operations": [_get(item, "operation")]}, call_id
    if kind in ("shell_call", "local_shell_call"):
        return "bash", {"action": _get(item, "action")}, call_id
    return None, None, call_id


def _responses_output(outcome: CallOutcome) -> str | list[dict[str, Any]]:
    """A call output's `output`: the text, or (a result with media) its list of input items."""
    items = outcome_parts(outcome)
    return responses_output(error_marked(items, outcome)) if with_media(items) else model_text(outcome)


def _media_after(answers: list[ChatAnswer]) -> list[ChatMessage]:
    """The tool messages, then the user message carrying their media (if any had some)."""
    messages: list[ChatMessage] = [message for message, _ in answers]
    media = chat_media_message([(message["tool_call_id"], parts) for message, parts in answers])
    if media is not None:
        messages.append(cast("ChatMessage", media))
    return messages


def _patch_output(call_id: str, outcome: CallOutcome, done: str) -> dict[str, Any]:
    if outcome.is_error:
        return {"type": "apply_patch_call_output", "call_id": call_id, "status": "failed", "output": outcome.text}
    return {"type": "apply_patch_call_output", "call_id": call_id, "status": "completed", "output": done}


__all__ = ["BACKING", "NativeType", "OpenAITools", "UnansweredCall"]
