"""OpenAI Agents SDK adapter: router tools as `agents.FunctionTool`s, and the SDK's native
`ShellTool`, `LocalShellTool` and `ApplyPatchTool` backed by toolroute.

    tools = AgentsTools(router, functions=["read_file", "grep", "bash", "apply_patch"], needs_approval=True)
    agent = Agent(name="coder", tools=[*tools.function_tools(), tools.shell_tool(), tools.apply_patch_tool()])
    result = await Runner.run(agent, task, run_config=tools.run_config())

Each tool runs through the router (sync tools in a worker thread); tool errors go back to the
model as text instead of failing the run. A tool name the model invents ends an Agents SDK run
with `ModelBehaviorError` unless the run says otherwise: `run_config()` gives a `RunConfig` that
returns the error to the model instead (`tool_not_found_behavior="return_error_to_model"`).
Approval is the SDK's own (`needs_approval` on each tool, answered with `RunState.approve` or
`reject`): which calls need it is the allowlist's rule (`needs_approval=`: all tools with side
effects, named ones, or a rule over the call; an MCP server's tools count as read-only only
when its annotations are trusted). Each call's kind and trace go into the SDK's tracing, as a
`toolroute` span under the tool's span. The native tools' executor and editor run each call
as the allowlist's own `bash` or `apply_patch` (confined, sandboxed as the context says, capped,
written atomically), where the SDK's own local backends run commands unconfined on the host and
apply a multi-file patch one file at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from toolroute._twins import run_async
from toolroute.adapters._content import error_marked, outcome_parts, responses_output, with_media
from toolroute.adapters._native import (
    PatchOperation,
    apply_operations,
    argv_command,
    capped,
    local_shell_output,
    run_command,
)
from toolroute.adapters._optional import require
from toolroute.allowlist import CallOutcome, ExposedTools, model_text
from toolroute.formats import namespace_name
from toolroute.toolsearch import is_search_tool

agents = require("agents", "agents", package="openai-agents")

if TYPE_CHECKING:
    from agents import ApplyPatchTool, FunctionTool, LocalShellTool, RunConfig, RunContextWrapper, ShellTool
    from agents.editor import ApplyPatchOperation, ApplyPatchResult
    from agents.tool import LocalShellCommandRequest, ShellCommandRequest, ShellResult
    from agents.tool_context import ToolContext


class AgentsTools(ExposedTools):
    """An allowlist of router tools as Agents SDK tools."""

    def function_tools(self, *, approve_side_effects: bool = False, namespaces: bool = False) -> list[Any]:
        """One `FunctionTool` per exposed tool, whose `needs_approval` is the allowlist's rule.
        `approve_side_effects=True` asks for approval of every tool not read-only, whatever the
        allowlist's rule (the older spelling of `needs_approval=True`).

        With deferred tools (`deferred=`), the SDK's own tool search (docs/tool_search.md): each
        deferred tool is a `FunctionTool` with `defer_loading` (in the agent's list, so callable
        once the model has loaded it), toolroute's `search_tools` gives way to the SDK's
        `ToolSearchTool()`, which OpenAI runs over them. `namespaces=True` groups each MCP
        server's or local service's deferred tools with the SDK's `tool_namespace`."""
        deferred = self.exposure.deferred
        if not deferred:
            return [self._function_tool(name, approve_side_effects) for name in self.names]
        listed = [
            self._function_tool(name, approve_side_effects)
            for name in self.names
            if not is_search_tool(self.exposure.tools.get(name))
        ]
        hidden = [
            self._function_tool(name, approve_side_effects, deferred=True)
            for name in self.exposure.tools
            if name in deferred
        ]
        return [*listed, *(self._namespaced(hidden) if namespaces else hidden), agents.ToolSearchTool()]

    def _namespaced(self, tools: list[FunctionTool]) -> list[FunctionTool]:
        """`tools` grouped by the service each came from (`tool_namespace`), the rest as they are."""
        groups: dict[str, list[FunctionTool]] = {}
        alone: list[FunctionTool] = []
        for tool in tools:
            service = self.exposure.namespaces.get(tool.name)
            (groups.setdefault(service, []) if service else alone).append(tool)
        grouped: list[FunctionTool] = []
        for service, members in groups.items():
            grouped += agents.tool_namespace(
                name=namespace_name(service), description=f"Tools of the {service} server.", tools=members
            )
        return [*grouped, *alone]

    def run_config(self, **options: Any) -> RunConfig:
        """A `RunConfig` that returns an invented tool name's error to the model (the SDK's
        default ends the run), with `options` as given."""
        options.setdefault("tool_not_found_behavior", "return_error_to_model")
        config: RunConfig = agents.RunConfig(**options)
        return config

    def _function_tool(self, name: str, approve_side_effects: bool, *, deferred: bool = False) -> FunctionTool:
        fn = self.definitions[name] if name in self.definitions else self.exposure.tools[name].definition()["function"]

        async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> str | list[Any]:
            # The SDK invokes a tool only once its approval (if one is needed) was given.
            outcome = await self.aexecute(name, arguments, approved=True)
            with agents.custom_span(
                "toolroute", data={"tool": name, "kind": outcome.kind.value, "trace": outcome.trace}
            ):
                return tool_output(outcome)

        async def asks(ctx: RunContextWrapper[Any], parameters: dict[str, Any], call_id: str) -> bool:
            return self.needs_approval(name, parameters)

        meta = self.meta(name)
        needs_approval: bool | Callable[..., Awaitable[bool]]
        if approve_side_effects:
            needs_approval = not meta.read_only
        elif callable(self.approval_rule):
            needs_approval = asks
        else:
            needs_approval = meta.needs_approval
        tool: FunctionTool = agents.FunctionTool(
            name=name,
            description=fn.get("description", ""),
            params_json_schema=fn["parameters"],
            on_invoke_tool=on_invoke_tool,
            # Strict mode would make every optional parameter required; keep the router's schema.
            strict_json_schema=False,
            needs_approval=needs_approval,
            defer_loading=deferred,
        )
        return tool

    # ---- native tools ---------------------------------------------------------------------

    def shell_tool(self, *, needs_approval: bool = False) -> ShellTool:
        """The SDK's `ShellTool` (OpenAI's `shell` type), each command the allowlist's `bash`."""
        self._require("bash", "ShellTool")
        tool: ShellTool = agents.ShellTool(executor=self._shell, needs_approval=needs_approval)
        return tool

    def local_shell_tool(self) -> LocalShellTool:
        """The SDK's `LocalShellTool` (OpenAI's older `local_shell` type), through `bash`."""
        self._require("bash", "LocalShellTool")
        tool: LocalShellTool = agents.LocalShellTool(executor=self._local_shell)
        return tool

    def apply_patch_tool(self, *, needs_approval: bool = False) -> ApplyPatchTool:
        """The SDK's `ApplyPatchTool` (OpenAI's `apply_patch` type), each operation the
        allowlist's `apply_patch` in V4A's rules."""
        self._require("apply_patch", "ApplyPatchTool")
        tool: ApplyPatchTool = agents.ApplyPatchTool(editor=PatchEditor(self), needs_approval=needs_approval)
        return tool

    def _require(self, name: str, what: str) -> None:
        if name not in self:
            raise ValueError(f"{what} runs the {name!r} built-in: expose it")

    async def _shell(self, request: ShellCommandRequest) -> ShellResult:
        from agents.tool import ShellCallOutcome, ShellCommandOutput, ShellResult

        action = request.data.action
        limit = action.max_output_length
        timeout = None if action.timeout_ms is None else action.timeout_ms / 1000
        outputs = []
        for command in action.commands:
            run = await run_async(run_command(self, command, timeout=timeout))
            outcome = ShellCallOutcome(type="timeout") if run.timed_out else ShellCallOutcome("exit", run.exit_code)
            outputs.append(
                ShellCommandOutput(
                    stdout=capped(run.stdout, limit), stderr=capped(run.stderr, limit), outcome=outcome, command=command
                )
            )
        return ShellResult(output=outputs, max_output_length=limit)

    async def _local_shell(self, request: LocalShellCommandRequest) -> str:
        action = request.data.action
        timeout = None if action.timeout_ms is None else action.timeout_ms / 1000
        command = argv_command(list(action.command), action.env)
        run = await run_async(run_command(self, command, timeout=timeout, cwd=action.working_directory))
        return local_shell_output(run)


def tool_output(outcome: CallOutcome) -> str | list[Any]:
    """What a function tool returns to the SDK: the text, or (a result with media) the SDK's
    `ToolOutputText`, `ToolOutputImage` and `ToolOutputFileContent` in order (the Responses API's
    `input_text`, `input_image` and `input_file`; what those cannot carry is said in the text)."""
    items = outcome_parts(outcome)
    if not with_media(items):
        return model_text(outcome)
    out: list[Any] = []
    for item in responses_output(error_marked(items, outcome)):
        if item["type"] == "input_image":
            out.append(agents.ToolOutputImage(image_url=item["image_url"]))
        elif item["type"] == "input_file":
            out.append(agents.ToolOutputFileContent(file_data=item["file_data"], filename=item["filename"]))
        else:
            out.append(agents.ToolOutputText(text=item["text"]))
    return out


class PatchEditor:
    """An `agents.editor.ApplyPatchEditor` over the allowlist's `apply_patch`: each operation
    confined and written atomically; a refusal is a `failed` result the model reads."""

    def __init__(self, tools: ExposedTools) -> None:
        self.tools = tools

    async def _apply(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        from agents.editor import ApplyPatchResult

        op = PatchOperation.of(operation)
        outcome = await run_async(apply_operations(self.tools, [op]))
        if outcome.is_error:
            return ApplyPatchResult(status="failed", output=outcome.text)
        return ApplyPatchResult(status="completed", output=op.done())

    async def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return await self._apply(operation)

    async def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return await self._apply(operation)

    async def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return await self._apply(operation)


__all__ = ["AgentsTools", "PatchEditor", "tool_output"]
