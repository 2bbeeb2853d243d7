"""A request is one value: its options are declared once (`ToolRequest`), checked once, and every
adapter's tools are assembled through one door (`ExposedTools`, over `assembly.assemble`)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolroute.allowlist
from toolroute.adapters.adk import ADKTools
from toolroute.adapters.anthropic import AnthropicTools
from toolroute.adapters.langchain import LangChainTools
from toolroute.adapters.llama_index import LlamaIndexTools
from toolroute.adapters.openai import OpenAITools
from toolroute.adapters.openai_agents import AgentsTools
from toolroute.adapters.pydantic_ai import PydanticAITools
from toolroute.adapters.smolagents import SmolagentsTools
from toolroute.allowlist import ExposedTools
from toolroute.errors import ToolArgumentError
from toolroute.request import RequestOptions, ToolRequest
from toolroute.router import ToolRouter
from toolroute.serve.doors import ServedTools

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "toolroute"

# The names a request's options go by, as parameters (the spec's AI4J names too).
OPTION_PARAMETERS = {
    "functions",
    "function_list",
    "mcp_servers",
    "mcp_server_ids",
    "user_servers",
    "needs_approval",
    "deferred",
}

# Where those names may still be parameters, and why: the convenience entry points docs/usage.md
# documents (each builds a ToolRequest), and a few places where the name means something else.
ALLOWED = {
    # the one definition: the request's own fields, its constructor (the fields' order) and its
    # convenience form
    ("request.py", "__init__"),
    # the spec's AI4J calls and their module-level twins: each builds a ToolRequest
    ("router.py", "expose"),
    ("router.py", "get_all_tools"),
    ("router.py", "get_all_function_tools"),
    ("router.py", "get_global_mcp_tools"),
    ("router.py", "get_user_mcp_tools"),
    ("default.py", "get_all_tools"),
    ("default.py", "get_all_function_tools"),
    ("default.py", "get_global_mcp_tools"),
    ("default.py", "get_user_mcp_tools"),
    ("agent/executor.py", "for_request"),
    # the assembly of the `deferred` option itself
    ("assembly.py", "_deferred"),
    # other meanings: the names an exposure holds back, one SDK tool's own flags
    ("exposure.py", "of"),
    # an upstream's question deferred to the client (returned as input_required), not a deferred tool
    ("asking.py", "__init__"),
    ("adapters/openai_agents.py", "_function_tool"),
    ("adapters/openai_agents.py", "shell_tool"),
    ("adapters/openai_agents.py", "apply_patch_tool"),
    # served mode from the command line: the functions that decide a tenant's sandbox, and the
    # parsed lists it builds its Tenancy's request of
    ("serve/isolation.py", "tenant_base_context"),
    ("serve/served_mode.py", "build_served_mode"),
}


def _functions_with_option_parameters() -> Iterator[tuple[str, str, set[str]]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                named = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} & OPTION_PARAMETERS
                if named:
                    yield path.relative_to(PACKAGE).as_posix(), node.name, named


def test_the_request_options_are_declared_once() -> None:
    """No signature re-declares a request's options (the adapters take a request, or the
    convenience form through `**options: Unpack[RequestOptions]`), but the documented few."""
    found = {(module, name): named for module, name, named in _functions_with_option_parameters()}
    assert set(found) - ALLOWED == set(), {k: found[k] for k in set(found) - ALLOWED}
    assert ALLOWED - set(found) == set()  # no stale entry: each exception still exists


def test_the_keyword_form_names_exactly_the_fields() -> None:
    """The constructor (written out, to set each checked value once) and the keyword form take
    exactly the fields, in their order, with their defaults."""
    fields = {f.name: f.type for f in dataclasses.fields(ToolRequest)}
    parameters = list(inspect.signature(ToolRequest).parameters.values())
    assert [p.name for p in parameters] == list(fields)
    assert [p.default for p in parameters] == [f.default for f in dataclasses.fields(ToolRequest)]
    assert [str(p.annotation) for p in parameters] == list(fields.values())
    assert RequestOptions.__annotations__.keys() == fields.keys()
    for name, annotation in RequestOptions.__annotations__.items():
        shown = annotation if isinstance(annotation, str) else annotation.__forward_arg__
        assert shown == fields[name], name


def test_the_finder_is_not_vacuous() -> None:
    """The signatures the rule reads do hold the names it looks for."""
    assert ("router.py", "expose") in {(m, n) for m, n, _ in _functions_with_option_parameters()}


def test_a_request_is_checked_once_with_clear_errors() -> None:
    request = ToolRequest(["read_file", "bash"], ["notes"], "u1", user_servers=["mine"], deferred=["notes"])
    assert request.functions == ("read_file", "bash") and request.deferred == ("notes",)
    assert hash(request) == hash(ToolRequest(("read_file", "bash"), ("notes",), "u1", ("mine",), ("notes",)))
    with pytest.raises(TypeError, match="not the single string 'bash'"):
        ToolRequest("bash")
    with pytest.raises(TypeError, match="names \\(strings\\), not int"):
        ToolRequest(mcp_servers=["notes", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="needs_approval takes a list of names"):
        ToolRequest(needs_approval="bash")
    with pytest.raises(ToolArgumentError, match="user_servers needs the user_id"):
        ToolRequest(user_servers=["mine"])
    with pytest.raises(ToolArgumentError):
        ToolRequest(user_id="../etc")
    with pytest.raises(ToolArgumentError, match="belongs to another user"):
        ToolRequest(mcp_servers=["user_u2_service_mail"], user_id="u1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.user_id = "u2"  # type: ignore[misc]


def test_the_convenience_form_builds_the_same_request() -> None:
    request = ToolRequest(["echo"], ["notes"], "u1", deferred=True, needs_approval=["echo"])
    assert ToolRequest.of(["echo"], ["notes"], "u1", deferred=True, needs_approval=["echo"]) == request
    assert ToolRequest.of(functions=["echo"], mcp_servers=["notes"], user_id="u1", deferred=True,
                          needs_approval=["echo"]) == request  # fmt: skip
    assert ToolRequest.of(request) is request
    with pytest.raises(TypeError, match="pass it alone"):
        ToolRequest.of(request, deferred=True)
    with pytest.raises(TypeError, match="multiple values for argument 'mcp_servers'"):
        ToolRequest.of(["echo"], ["notes"], mcp_servers=["notes"])
    with pytest.raises(TypeError, match="mcp_servers given both positionally and by keyword"):
        ToolRequest.of((), ["notes"], functions=["echo"], mcp_servers=["notes"])
    with pytest.raises(TypeError, match="functions given both positionally and by keyword"):
        ToolRequest.of(["echo"], functions=["echo"])
    assert ToolRequest.of((), ["notes"], "u1", functions=["echo"], deferred=True,
                          needs_approval=["echo"]) == request  # fmt: skip
    with pytest.raises(TypeError, match="at most functions, mcp_servers, user_id"):
        ToolRequest.of(["echo"], [], "u1", [])  # type: ignore[arg-type]


# Every adapter, as built from a router and a request.
ADAPTERS: dict[str, Callable[[ToolRouter, ToolRequest], Any]] = {
    "ExposedTools": ExposedTools.of,
    "ServedTools": ServedTools.of,
    "OpenAITools": OpenAITools,
    "AnthropicTools": AnthropicTools,
    "LangChainTools": LangChainTools,
    "AgentsTools": AgentsTools,
    "PydanticAITools": PydanticAITools,
    "ADKTools": ADKTools,
    "LlamaIndexTools": LlamaIndexTools,
    "SmolagentsTools": SmolagentsTools,
}


def _door(adapter: Any) -> ExposedTools:
    return adapter if isinstance(adapter, ExposedTools) else adapter.tools


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_every_adapter_is_built_through_the_one_door(
    name: str, router: ToolRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built from a request, an adapter's tools are assembled once, of that very request, by
    the allowlist's door; built from an allowlist, nothing is assembled again."""
    assembled: list[ToolRequest] = []
    real = toolroute.allowlist.assemble

    def spy(source: Any, request: ToolRequest) -> Any:
        assembled.append(request)
        return real(source, request)

    monkeypatch.setattr(toolroute.allowlist, "assemble", spy)
    request = ToolRequest(["read_file", "grep"], needs_approval=["grep"])
    adapter = ADAPTERS[name](router, request)
    door = _door(adapter)
    assert assembled == [request] and assembled[0] is request
    assert door.request is request and door.names == ["read_file", "grep"]
    assert door.needs_approval("grep") and not door.needs_approval("read_file")
    if not isinstance(adapter, ExposedTools):  # a framework's wrapper takes the allowlist itself
        again = type(adapter)(door)
        assert again.tools is door and len(assembled) == 1
        with pytest.raises(TypeError, match="carries its request"):
            type(adapter)(door, deferred=True)


def test_the_old_adapter_names_are_the_new_classes() -> None:
    from toolroute.adapters import adk, llama_index, pydantic_ai, smolagents

    assert pydantic_ai.RouterToolset is PydanticAITools
    assert adk.RouterToolset is ADKTools
    assert llama_index.RouterToolSpec is LlamaIndexTools
    assert smolagents.RouterTools is SmolagentsTools


def test_only_the_door_and_the_router_assemble_an_exposure() -> None:
    """`assemble(...)` is called in exactly two places: the allowlist's door and the router's
    `expose` convenience; no adapter builds an `ExposedTools(...)` of its own options."""
    callers: set[tuple[str, str]] = set()
    constructed: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        source = path.read_text()
        tree = ast.parse(source)
        ours = "from toolroute.assembly import" in source  # other modules' `assemble` are others'
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    if node.func.id == "assemble" and ours:
                        callers.add((module, func.name))
                    if node.func.id == "ExposedTools":
                        constructed.add(module)
    assert callers == {("allowlist.py", "__init__"), ("router.py", "expose")}
    assert constructed == set(), constructed
