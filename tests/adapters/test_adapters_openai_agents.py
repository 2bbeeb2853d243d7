"""OpenAI Agents SDK adapter: the real Runner drives router tools from a recorded model response."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from _framework_script import World, world
from _serve_helpers import make_router
from _serve_tools import MARKER_ENV
from agents import Agent, FunctionTool, ModelResponse, RunConfig, Runner, Usage
from agents.models.interface import Model
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from toolroute.adapters.openai_agents import AgentsTools

__all__ = ["world"]  # the shared scripted run's fixture


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentsTools:
    monkeypatch.setenv(MARKER_ENV, str(tmp_path / "ran"))
    with make_router(tmp_path) as router:
        yield AgentsTools(router, ["echo", "add", "touch_marker"], ["notes"])


class RecordedModel(Model):
    """Replays recorded turns: first the tool calls, then a final answer; keeps what it was sent."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []
        self.tool_names: list[list[str]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        self.tool_names.append([t.name for t in tools])
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def call(call_id: str, name: str, arguments: dict) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments))


def answer(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def test_function_tools_carry_the_router_schema(tools: AgentsTools) -> None:
    function_tools = tools.function_tools()
    assert all(isinstance(t, FunctionTool) for t in function_tools)
    assert [t.name for t in function_tools] == ["echo", "add", "touch_marker", "notes_shout"]
    add = function_tools[1]
    assert add.params_json_schema == tools.definitions["add"]["parameters"]
    assert add.strict_json_schema is False
    assert add.description == "Add two integers."


def test_on_invoke_tool_runs_the_router_and_reports_errors_as_text(tools: AgentsTools) -> None:
    echo, add = tools.function_tools()[:2]

    async def go() -> tuple[Any, Any]:
        args = '{"text": "x", "times": 3}'
        ctx = ToolContext(context=None, tool_name="echo", tool_call_id="c1", tool_arguments=args)
        ok = await echo.on_invoke_tool(ctx, args)
        bad = await add.on_invoke_tool(ToolContext(None, tool_name="add", tool_call_id="c2", tool_arguments="{}"), "{}")
        return ok, bad

    ok, bad = anyio.run(go)
    assert ok == "xxx"
    assert bad.startswith("Error: invalid arguments for 'add'")


def test_the_runner_executes_recorded_tool_calls(tools: AgentsTools) -> None:
    model = RecordedModel(
        [call("c1", "add", {"a": 20, "b": 22}), call("c2", "notes_shout", {"text": "ok"})],
        [answer("the sum is 42")],
    )
    agent = Agent(name="t", instructions="use tools", tools=tools.function_tools(), model=model)
    result = anyio.run(lambda: Runner.run(agent, "add", run_config=RunConfig(tracing_disabled=True)))
    assert result.final_output == "the sum is 42"
    assert model.tool_names[0] == ["echo", "add", "touch_marker", "notes_shout"]
    outputs = {i["call_id"]: i["output"] for i in model.inputs[1] if i.get("type") == "function_call_output"}
    assert json.loads(outputs["c1"]) == {"sum": 42}
    assert outputs["c2"] == "OK"


def test_side_effect_tools_can_require_approval(tools: AgentsTools, tmp_path: Path) -> None:
    function_tools = {t.name: t for t in tools.function_tools(approve_side_effects=True)}
    assert function_tools["echo"].needs_approval is False  # declared read-only
    assert function_tools["touch_marker"].needs_approval is True
    model = RecordedModel([call("c1", "touch_marker", {})], [answer("done")])
    agent = Agent(name="t", tools=list(function_tools.values()), model=model)
    result = anyio.run(lambda: Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
    assert [i.raw_item.name for i in result.interruptions] == ["touch_marker"]  # paused for approval
    assert not (tmp_path / "ran").exists()


# ---- the SDK's native ShellTool, LocalShellTool and ApplyPatchTool on toolroute ---------------


def _shell_call(call_id: str, *commands: str, **action: Any) -> Any:
    from openai.types.responses import ResponseFunctionShellToolCall

    return ResponseFunctionShellToolCall.model_validate(
        {
            "type": "shell_call",
            "id": f"s_{call_id}",
            "call_id": call_id,
            "status": "completed",
            "action": {"commands": list(commands), **action},
        }
    )


def _patch_call(call_id: str, **operation: Any) -> dict[str, Any]:
    return {"type": "apply_patch_call", "call_id": call_id, "status": "completed", "operation": operation}


def _outputs(model: Any) -> dict[str, dict[str, Any]]:
    """The output items the run sent back to the model, by call id."""
    sent = model.calls[-1].input
    return {i["call_id"]: i for i in sent if isinstance(i, dict) and str(i.get("type", "")).endswith("_output")}


def test_a_scripted_run_drives_shell_and_apply_patch_through_toolroute(tmp_path: Path) -> None:
    from agents.testing import ScriptedModel, assistant_message

    from toolroute import BuiltInToolContext, ToolRouter

    (tmp_path / "a.txt").write_text("one\n")
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as router:
        tools = AgentsTools(router, functions=["bash", "apply_patch"])
        model = ScriptedModel(
            [
                [
                    _patch_call("p1", type="update_file", path="a.txt", diff="@@\n-one\n+ONE\n"),
                    _patch_call("p2", type="create_file", path="a.txt", diff="+clobber"),
                ],
                [_shell_call("s1", "cat a.txt", "exit 4", "sleep 30", timeout_ms=1500)],
                [assistant_message("done")],
            ]
        )
        agent = Agent(name="coder", model=model, tools=[tools.shell_tool(), tools.apply_patch_tool()])
        result = anyio.run(lambda: Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
    assert result.final_output == "done"
    assert (tmp_path / "a.txt").read_text() == "ONE\n"  # updated, and never clobbered by the create
    # The second turn saw the patches' answers.
    patches = {
        i["call_id"]: i
        for i in model.calls[1].input
        if isinstance(i, dict) and i.get("type") == "apply_patch_call_output"
    }
    assert patches["p1"]["status"] == "completed" and patches["p2"]["status"] == "failed"
    assert "already exists" in patches["p2"]["output"]
    shell = _outputs(model)["s1"]["output"]
    assert shell[0]["stdout"] == "ONE\n" and shell[1]["outcome"] == {"type": "exit", "exit_code": 4}
    assert shell[2]["outcome"] == {"type": "timeout"}


def test_the_native_tools_run_only_as_exposed_built_ins_and_in_the_sandbox() -> None:
    """ShellTool and ApplyPatchTool need bash and apply_patch exposed; under a sandbox the
    shell writes nowhere but the workspace and sees no host secret (the SDK's unix_local
    backend wrote outside and leaked $OPENAI_API_KEY)."""
    import os
    import shutil

    from _serve_helpers import outside_tmp
    from agents.testing import ScriptedModel, assistant_message

    from toolroute import BuiltInToolContext, ToolRouter
    from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind

    base = outside_tmp()
    try:
        with ToolRouter(context=BuiltInToolContext(base)) as router:
            narrow = AgentsTools(router, functions=["read_file"])
            with pytest.raises(ValueError, match="bash"):
                narrow.shell_tool()
            with pytest.raises(ValueError, match="apply_patch"):
                narrow.apply_patch_tool()
        try:
            resolve_kind("on")
        except SandboxUnavailable as exc:
            pytest.skip(f"no sandbox here: {exc}")
        ws = base / "ws"
        ws.mkdir()
        os.environ["OPENAI_API_KEY"] = "sk-host-secret-456"
        try:
            with ToolRouter(context=BuiltInToolContext(ws, sandbox="on")) as router:
                tools = AgentsTools(router, functions=["bash"])
                model = ScriptedModel(
                    [
                        [_shell_call("s1", f"echo x > {base}/outside.txt; echo key=[$OPENAI_API_KEY]")],
                        [assistant_message("done")],
                    ]
                )
                agent = Agent(name="coder", model=model, tools=[tools.shell_tool()])
                anyio.run(lambda: Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
        finally:
            del os.environ["OPENAI_API_KEY"]
        (out,) = _outputs(model)["s1"]["output"]
        assert out["stdout"] == "key=[]\n" and not (base / "outside.txt").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_local_shell_tool_runs_its_argv(tmp_path: Path) -> None:
    from agents.testing import ScriptedModel, assistant_message
    from openai.types.responses import ResponseOutputItem
    from pydantic import TypeAdapter

    from toolroute import BuiltInToolContext, ToolRouter

    call = TypeAdapter(ResponseOutputItem).validate_python(
        {
            "type": "local_shell_call",
            "id": "l1",
            "call_id": "l1",
            "status": "completed",
            "action": {"type": "exec", "command": ["printf", "%s", "a b; c"], "env": {}},
        }
    )
    with ToolRouter(context=BuiltInToolContext(tmp_path)) as router:
        tools = AgentsTools(router, functions=["bash"])
        model = ScriptedModel([[call], [assistant_message("done")]])
        agent = Agent(name="coder", model=model, tools=[tools.local_shell_tool()])
        anyio.run(lambda: Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))
    sent = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("type") == "local_shell_call_output"]
    assert json.loads(sent[0]["output"])["output"] == "a b; c"


# ---- the shared scripted run (issue 42): every outcome, approval by the SDK's RunState ---------


def test_a_scripted_run_reaches_every_outcome_as_the_agents_sdk_expects(world: World) -> None:
    from _framework_script import APPROVED, FINAL, FUNCTIONS, MCP_SERVERS, NEEDS_APPROVAL, REJECTED, TURNS
    from agents.testing import ScriptedModel, assistant_message, function_call

    tools = AgentsTools(world.router, FUNCTIONS, MCP_SERVERS, needs_approval=NEEDS_APPROVAL)
    steps: list[Any] = [[function_call(c.name, c.arguments, call_id=c.id) for c in turn] for turn in TURNS]
    model = ScriptedModel([*steps, [assistant_message(FINAL)]])
    agent = Agent(name="coder", model=model, tools=tools.function_tools())
    config = tools.run_config(tracing_disabled=True)
    first = anyio.run(lambda: Runner.run(agent, "go", run_config=config))
    assert sorted(i.raw_item.call_id for i in first.interruptions) == [APPROVED, REJECTED]
    assert world.log.read_text() == ""
    state = first.to_state()
    for item in first.interruptions:
        if item.raw_item.call_id == APPROVED:
            state.approve(item)
        else:
            state.reject(item, rejection_message="rejected: not this one")
    second = anyio.run(lambda: Runner.run(agent, state, run_config=config))
    assert second.final_output == FINAL
    world.seen = {
        i["call_id"]: str(i.get("output"))
        for call in model.calls
        for i in call.input
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }
    assert "not this one" in world.seen[REJECTED]
    world.check()


def test_the_trace_is_kept_and_an_invented_name_ends_a_run_only_without_run_config(world: World) -> None:
    """Each call's kind and trace reach the SDK's tracing as a `toolroute` span; an invented
    name is the model's error with `run_config()`, and (the SDK's default) ends the run without."""
    from agents import ModelBehaviorError, set_trace_processors
    from agents.testing import ScriptedModel, assistant_message, function_call
    from agents.tracing.processor_interface import TracingProcessor

    class Collect(TracingProcessor):
        def __init__(self) -> None:
            self.spans: list[Any] = []

        def on_trace_start(self, trace: Any) -> None: ...
        def on_trace_end(self, trace: Any) -> None: ...
        def on_span_start(self, span: Any) -> None: ...
        def on_span_end(self, span: Any) -> None:
            self.spans.append(span)

        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    tools = AgentsTools(world.router, ["read_file"])
    collect = Collect()
    set_trace_processors([collect])
    try:
        model = ScriptedModel(
            [[function_call("read_file", {"path": "notes.txt"}, call_id="r1")], [assistant_message("ok")]]
        )
        agent = Agent(name="coder", model=model, tools=tools.function_tools())
        anyio.run(lambda: Runner.run(agent, "go", run_config=tools.run_config()))
    finally:
        set_trace_processors([])
    ours = [s.span_data.data for s in collect.spans if getattr(s.span_data, "name", None) == "toolroute"]
    assert (
        ours and ours[0]["tool"] == "read_file" and ours[0]["kind"] == "ok" and ours[0]["trace"]["path"] == "notes.txt"
    )

    invented = [[function_call("no_such_tool", {}, call_id="x1")], [assistant_message("ok")]]
    model = ScriptedModel(invented)
    agent = Agent(name="coder", model=model, tools=tools.function_tools())
    done = anyio.run(lambda: Runner.run(agent, "go", run_config=tools.run_config(tracing_disabled=True)))
    assert done.final_output == "ok"
    with pytest.raises(ModelBehaviorError):
        model = ScriptedModel(invented)
        agent = Agent(name="coder", model=model, tools=tools.function_tools())
        anyio.run(lambda: Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))


@pytest.mark.parametrize("namespaces", [False, True], ids=["top-level", "namespaced"])
def test_deferred_tools_use_the_sdks_own_tool_search(tmp_path: Path, namespaces: bool) -> None:
    """`deferred=`: the deferred tools go with `defer_loading` beside the SDK's `ToolSearchTool`,
    as the SDK's own Responses converter takes them; the runner calls one the model loaded."""
    from agents import ToolSearchTool
    from agents.models.openai_responses import Converter

    with make_router(tmp_path) as router:
        tools = AgentsTools(router, ["echo", "add"], ["notes"], deferred=["notes"])
        shaped = tools.function_tools(namespaces=namespaces)
        assert isinstance(shaped[-1], ToolSearchTool)
        names = [t.name for t in shaped[:-1]]
        assert names[:2] == ["echo", "add"] and "search_tools" not in names
        assert all(t.defer_loading for t in shaped[2:-1]) and "notes_shout" in names[2:]
        converted = Converter.convert_tools(shaped, [])
        kinds = [t["type"] for t in converted.tools]
        assert kinds[-1] == "tool_search"
        if namespaces:
            space = next(t for t in converted.tools if t["type"] == "namespace")
            assert space["name"] == "notes"
            assert {t["name"] for t in space["tools"]} == {n for n in names if n.startswith("notes_")}
        else:
            deferred = [t for t in converted.tools if t.get("defer_loading")]
            assert {t["name"] for t in deferred} == {n for n in names if n.startswith("notes_")}
        # The hosted search happens at OpenAI; the model then calls what it loaded, in the wire
        # shape of a loaded tool: its namespace, or (a deferred top-level tool) its own name.
        loaded = call("c1", "notes_shout", {"text": "found"})
        loaded = loaded.model_copy(update={"namespace": "notes" if namespaces else "notes_shout"})
        model = RecordedModel([loaded], [answer("done")])
        agent = Agent(name="t", instructions="search, then use", tools=shaped, model=model)
        result = anyio.run(lambda: Runner.run(agent, "shout", run_config=RunConfig(tracing_disabled=True)))
        assert result.final_output == "done"
        outputs = {i["call_id"]: i["output"] for i in model.inputs[1] if i.get("type") == "function_call_output"}
        assert outputs["c1"] == "FOUND"
        # Without deferred tools nothing changes: no search tool, no deferred flag.
        plain = AgentsTools(router, ["echo"], ["notes"]).function_tools()
        assert not any(isinstance(t, ToolSearchTool) or t.defer_loading for t in plain)
