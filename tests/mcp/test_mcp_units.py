"""Pure parts of the gateway: results to text, schema projection, exposed-name planning."""

from __future__ import annotations

import base64

import jsonschema
import mcp_types as types
import pytest

from toolroute._core import RouteTable, ToolKind
from toolroute.errors import ToolExecutionError, ToolRegistrationError
from toolroute.mcp.projection import declared, tool_definition
from toolroute.mcp.results import content_text, to_output
from toolroute.naming import has_user_form, is_valid_tool_name, mcp_tool_candidates


def plan_names(tools_by_service: dict[str, list[str]], table: RouteTable | None = None) -> dict[tuple[str, str], str]:
    """The router's naming plan for one batch of global MCP tools."""
    table = table or RouteTable()
    pairs = [(s, t) for s, tools in tools_by_service.items() for t in tools]
    names = table.plan(ToolKind.GLOBAL_MCP, [(f"{s}\0{t}", mcp_tool_candidates(s, t)) for s, t in pairs])
    assert all(n is not None for n in names)
    return {pair: name for pair, name in zip(pairs, names, strict=True) if name is not None}


def _result(*blocks: object, is_error: bool = False, structured: object = None) -> types.CallToolResult:
    return types.CallToolResult(content=list(blocks), is_error=is_error, structured_content=structured)


def test_text_blocks_join_and_binary_blocks_are_summarised_not_dumped() -> None:
    png = base64.b64encode(b"x" * 300).decode()
    text = content_text(
        [
            types.TextContent(text="one"),
            types.TextContent(text="two"),
            types.ImageContent(data=png, mime_type="image/png"),
            types.AudioContent(data=base64.b64encode(b"abc").decode(), mime_type="audio/wav"),
            types.EmbeddedResource(resource=types.BlobResourceContents(uri="file:///a.bin", blob=png)),
        ]
    )
    assert text.splitlines() == [
        "one",
        "two",
        "[image: image/png, 300 bytes]",
        "[audio: audio/wav, 3 bytes]",
        "[resource file:///a.bin (unknown type, 300 bytes)]",
    ]
    assert png not in text


def test_structured_content_goes_to_the_trace() -> None:
    out = to_output(
        _result(types.TextContent(text="5"), structured={"result": 5}), service="s", tool="t", exposed_name="t"
    )
    assert out.text == "5"
    assert out.trace["structured_content"] == {"result": 5}
    assert out.trace["content"] == [{"type": "text", "chars": 1}]


def test_is_error_raises_with_the_servers_message() -> None:
    # AI4J ignores isError and hands the error text to the model as a success.
    with pytest.raises(ToolExecutionError, match="quota exceeded") as info:
        to_output(
            _result(types.TextContent(text="quota exceeded"), is_error=True), service="s", tool="t", exposed_name="x"
        )
    assert info.value.tool == "x"


NESTED = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "createArguments",
    "type": "object",
    "properties": {
        "person": {"$ref": "#/$defs/Person"},
        "color": {"$ref": "#/$defs/Color", "default": "red"},
    },
    "required": ["person"],
    "$defs": {
        "Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "Person": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/Address"}},
            "required": ["name", "address"],
        },
        "Color": {"enum": ["red", "blue"], "type": "string"},
    },
}


def test_what_a_tool_declares_is_kept_with_its_controls_made_visible() -> None:
    hostile = types.Tool(
        name="t",
        title="Look \x1b[31mup\u202e",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"n": {"type": "integer", "description": "x\x1b]0;"}}},
        annotations=types.ToolAnnotations(title="T\x07", read_only_hint=True),
    )
    got = declared(hostile)
    assert got.title is not None and "\x1b" not in got.title and "\u202e" not in got.title
    assert got.title.startswith("Look ") and "up" in got.title
    assert got.annotations == {"title": "T\\x07", "readOnlyHint": True}  # MCP's own keys
    assert "\x1b" not in str(got.output_schema)
    # A tool that declares nothing gets nothing invented: its wire form is what it sent.
    plain = declared(types.Tool(name="plain", input_schema={"type": "object"}))
    assert (plain.annotations, plain.title, plain.output_schema) == (None, None, None)
    assert plain.wire == {"name": "plain", "inputSchema": {"type": "object"}}
    # The input schema passes with its title and $defs (the router's own parameters inline them).
    nested = {"type": "object", "title": "createArguments", "properties": {"p": {"$ref": "#/$defs/P"}},
              "$defs": {"P": {"type": "object", "properties": {"n": {"type": "string"}}}}}  # fmt: skip
    assert declared(types.Tool(name="c", input_schema=nested)).wire == {"name": "c", "inputSchema": nested}


def test_nested_schema_fields_survive_projection() -> None:
    # AI4J drops nested fields; here the nested object is inlined, complete and still validates.
    params = tool_definition("create", types.Tool(name="create", input_schema=NESTED))["function"]["parameters"]
    assert "$ref" not in str(params) and "$schema" not in params and "$defs" not in params
    assert params["properties"]["person"]["properties"]["address"]["required"] == ["city"]
    assert params["properties"]["color"] == {"enum": ["red", "blue"], "type": "string", "default": "red"}
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid({"person": {"name": "a", "address": {"city": "Paris"}}})
    assert not validator.is_valid({"person": {"name": "a", "address": {}}})


@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"properties": {"x": {"type": "integer"}}}])
def test_schemas_become_object_parameters(schema: dict[str, object]) -> None:
    params = tool_definition("t", types.Tool(name="t", input_schema=schema))["function"]["parameters"]
    assert params["type"] == "object" and isinstance(params["properties"], dict)


def test_a_dangling_ref_is_refused() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}
    with pytest.raises(ToolRegistrationError, match="names nothing"):
        tool_definition("t", types.Tool(name="t", input_schema=schema))


def test_unique_names_stay_plain_and_collisions_in_one_batch_are_qualified_for_every_owner() -> None:
    names = plan_names({"github": ["search", "create_issue"], "jira": ["search"], "web": ["fetch"]})
    assert names[("github", "create_issue")] == "create_issue"
    assert names[("web", "fetch")] == "fetch"
    assert names[("github", "search")] == "github_search"
    assert names[("jira", "search")] == "jira_search"


def test_plan_is_independent_of_order_within_a_batch() -> None:
    assert plan_names({"x": ["t", "u"], "y": ["t"]}) == plan_names({"y": ["t"], "x": ["u", "t"]})


def test_a_later_batch_never_renames_an_incumbent() -> None:
    table = RouteTable()
    assert plan_names({"g1": ["search"]}, table) == {("g1", "search"): "search"}
    assert plan_names({"g2": ["search"]}, table) == {("g2", "search"): "g2_search"}
    assert plan_names({"g1": ["search"], "g2": ["search"]}, table) == {
        ("g1", "search"): "search",
        ("g2", "search"): "g2_search",
    }


def test_illegal_and_long_names_are_sanitised_and_distinct() -> None:
    long_a = "a" * 70 + "_one"
    long_b = "a" * 70 + "_two"
    names = plan_names({"s": ["text.shout", "files/read", long_a, long_b]})
    assert all(is_valid_tool_name(n) for n in names.values())
    assert len(set(names.values())) == 4
    assert names[("s", "text.shout")] == "text_shout"


def test_user_form_names_are_never_exposed_for_shared_tools() -> None:
    name = plan_names({"s": ["user_1_tool_x"]})[("s", "user_1_tool_x")]
    assert not has_user_form(name) and is_valid_tool_name(name)


def test_same_tool_name_twice_on_one_server_after_sanitising() -> None:
    names = plan_names({"s": ["a.b", "a_b"]})
    assert len(set(names.values())) == 2
    # derived from each tool's identity, so the same whichever the server lists first
    assert names == plan_names({"s": ["a_b", "a.b"]})


def test_the_loop_threads_sync_handoff() -> None:
    """`LoopThread.run`: the value or the exception of the coroutine, run in an empty context on
    the gateway's loop (run by the caller itself when the loop is free); a stop during the call
    ends it with an error (never a hang), and a stopped loop refuses."""
    import asyncio
    import contextvars
    import threading
    import time

    from toolroute.mcp.loop import LoopThread

    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="none")
    loop = LoopThread("test-loop")

    async def where() -> tuple[bool, str]:
        return asyncio.get_running_loop() is loop.loop, mark.get()

    async def fails() -> None:
        raise ValueError("from the loop")

    async def forever() -> None:
        await asyncio.sleep(3600)

    mark.set("caller's")
    assert loop.run(where()) == (True, "none")  # the caller's context stays behind
    with pytest.raises(ValueError, match="from the loop"):
        loop.run(fails())
    threading.Timer(0.2, loop.stop).start()
    began = time.monotonic()
    with pytest.raises(ToolExecutionError, match="closed during the call"):
        loop.run(forever())
    assert time.monotonic() - began < 10
    late = where()
    with pytest.raises(ToolExecutionError, match="gateway is closed"):
        loop.run(late)
