from __future__ import annotations

from enum import Enum
from typing import Literal

import jsonschema
import pytest
from anthropic.types import ToolParam
from openai.types.shared_params import FunctionDefinition
from pydantic import AliasChoices, BaseModel, Field, TypeAdapter

from toolroute import ToolRegistrationError, ToolRouter, function_tool, to_anthropic, to_responses
from toolroute.schema import inline_refs


class Color(str, Enum):
    red = "red"
    blue = "blue"


class Address(BaseModel):
    street: str = Field(description="Street and number")
    zip_code: str


class Person(BaseModel):
    """A person to store."""

    name: str = Field(description="Full name")
    age: int = Field(30, ge=0, description="Age in years")
    favourite: Color = Color.red
    mode: Literal["fast", "slow"] = "fast"
    home: Address
    others: list[Address] = Field(default_factory=list)


@function_tool(name="store_person", description="Store a person")
class StorePerson:
    def apply(self, request: Person) -> dict[str, object]:
        return {"stored": request.name, "street": request.home.street}


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


def _tree_sum(tree: Tree) -> int:
    return tree.value + sum(_tree_sum(c) for c in tree.children)


@function_tool
def walk_tree(tree: Tree) -> int:
    """Sum a tree."""
    return _tree_sum(tree)


def _router() -> ToolRouter:
    r = ToolRouter(builtins={})
    r.register(StorePerson)
    r.register(walk_tree)
    return r


def _all_refs(node: object) -> list[str]:
    if isinstance(node, dict):
        refs = [node["$ref"]] if "$ref" in node else []
        return refs + [r for v in node.values() for r in _all_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _all_refs(v)]
    return []


def test_schema_keeps_descriptions_required_enums_defaults_order_and_nesting():
    (tool,) = _router().get_all_function_tools(["store_person"])
    fn = tool["function"]
    assert tool["type"] == "function" and fn["name"] == "store_person"
    assert fn["description"] == "Store a person"
    params = fn["parameters"]
    assert list(params["properties"]) == ["name", "age", "favourite", "mode", "home", "others"]
    assert set(params["required"]) == {"name", "home"}
    assert params["properties"]["name"]["description"] == "Full name"
    assert params["properties"]["age"]["default"] == 30 and params["properties"]["age"]["minimum"] == 0
    assert params["properties"]["favourite"]["enum"] == ["red", "blue"]
    assert params["properties"]["mode"]["enum"] == ["fast", "slow"]
    home = params["properties"]["home"]
    assert home["properties"]["street"]["description"] == "Street and number"  # nested fields kept
    assert params["properties"]["others"]["items"]["required"] == ["street", "zip_code"]
    assert "$defs" not in params and _all_refs(params) == []


def test_schema_is_valid_json_schema_and_openai_shape():
    for tool in _router().get_all_function_tools(["store_person", "walk_tree"]):
        params = tool["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        TypeAdapter(FunctionDefinition).validate_python(tool["function"])
        for ref in _all_refs(params):  # recursion stays, but resolvable inside the document
            assert ref.removeprefix("#/$defs/") in params["$defs"]


def test_schema_validates_real_arguments():
    (tool,) = _router().get_all_function_tools(["store_person"])
    validator = jsonschema.Draft202012Validator(tool["function"]["parameters"])
    validator.validate({"name": "Ada", "home": {"street": "Main 1", "zip_code": "1000"}})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"name": "Ada"})


def test_function_tool_round_trip_through_invoke():
    r = _router()
    out = r.invoke("store_person", {"name": "Ada", "home": {"street": "Main 1", "zip_code": "1"}})
    assert out == '{"stored":"Ada","street":"Main 1"}'
    tree = {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}
    assert r.invoke("walk_tree", {"tree": tree}) == "6"


def test_dangling_ref_is_refused():
    with pytest.raises(ToolRegistrationError, match="names nothing"):
        inline_refs({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}})


def test_definitions_style_refs_are_inlined():
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/A"}},
        "definitions": {"A": {"type": "string", "description": "an a"}},
    }
    assert inline_refs(schema) == {"type": "object", "properties": {"a": {"type": "string", "description": "an a"}}}


def test_anthropic_and_responses_formats():
    tools = _router().get_all_function_tools(["store_person"])
    (anthropic,) = to_anthropic(tools)
    TypeAdapter(ToolParam).validate_python(anthropic)
    assert anthropic["name"] == "store_person" and anthropic["input_schema"]["type"] == "object"
    (responses,) = to_responses(tools)
    assert responses["type"] == "function" and responses["name"] == "store_person"
    assert responses["parameters"] == tools[0]["function"]["parameters"]


def test_all_eight_builtins_are_exposed_with_valid_schemas():
    from toolroute import BUILTIN_TOOL_NAMES

    router = ToolRouter()
    tools = router.get_all_function_tools(list(BUILTIN_TOOL_NAMES))
    assert [t["function"]["name"] for t in tools] == [
        "bash",
        "read_file",
        "write_file",
        "apply_patch",
        "glob",
        "grep",
        "edit",
        "update_agents_md",
    ]
    for tool in tools:
        fn = tool["function"]
        assert fn["description"].strip()
        jsonschema.Draft202012Validator.check_schema(fn["parameters"])
        TypeAdapter(FunctionDefinition).validate_python(fn)
        assert _all_refs(fn["parameters"]) == []
    read_only = {name for name in BUILTIN_TOOL_NAMES if router.traits(name).read_only}
    assert read_only == {"read_file", "glob", "grep"}  # bash is side-effecting (AI4J counted it read-only)


class Aliased(BaseModel):
    file_type: str = Field(validation_alias=AliasChoices("type", "file_type"))


def test_schema_shows_the_names_validation_accepts():
    @function_tool(name="aliased")
    def aliased(request: Aliased) -> str:
        return request.file_type

    router = ToolRouter(builtins={})
    router.register(aliased)
    props = router.get_all_function_tools(["aliased"])[0]["function"]["parameters"]["properties"]
    assert list(props["request"]["properties"]) == ["type"]
    assert router.invoke("aliased", {"request": {"type": "py"}}) == "py"
    grep = ToolRouter().get_all_function_tools(["grep"])[0]["function"]["parameters"]["properties"]
    assert "type" in grep and "file_type" not in grep


# ---- strict mode for the Responses API (issue 14 item 14) -----------------------------------


def _closed(properties: dict[str, object], **extra: object) -> dict[str, object]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


@pytest.mark.parametrize(
    ("parameters", "strict"),
    [
        (_closed({"a": {"type": "string"}}), True),
        (_closed({"a": _closed({"b": {"type": "integer"}})}), True),
        (_closed({"a": {"type": "array", "items": _closed({"b": {"type": "number"}})}}), True),
        (_closed({"a": {"$ref": "#/$defs/B"}}, **{"$defs": {"B": _closed({"c": {"type": "string"}})}}), True),
        (_closed({"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}), True),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),  # open
        ({**_closed({"a": {"type": "string"}}), "required": []}, False),  # an optional field
        (_closed({"a": {"type": "object", "properties": {}}}), False),  # a nested open object
        (_closed({"a": {"type": "string", "default": "x"}}), False),  # a keyword strict does not take
        (_closed({"a": {"type": "array", "items": {"type": "object", "properties": {}}}}), False),
        (_closed({"a": {"$ref": "#/$defs/B"}}, **{"$defs": {"B": {"type": "object", "properties": {}}}}), False),
    ],
)
def test_strict_only_where_the_schema_qualifies(parameters: dict[str, object], strict: bool) -> None:
    from openai.types.responses import FunctionToolParam

    tool = {"type": "function", "function": {"name": "t", "description": "", "parameters": parameters}}
    (shaped,) = to_responses([tool])
    assert shaped["strict"] is strict
    TypeAdapter(FunctionToolParam).validate_python(shaped)


def test_a_definitions_own_strict_is_kept() -> None:
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}, "strict": True}}
    assert to_responses([tool])[0]["strict"] is True


# ---- $ref inlining within a budget (issue 11, repro 2) --------------------------------------


def _exponential(levels: int) -> dict[str, object]:
    defs: dict[str, object] = {"L0": {"type": "string"}}
    for i in range(1, levels + 1):
        prev = {"$ref": f"#/$defs/L{i - 1}"}
        defs[f"L{i}"] = {"type": "object", "properties": {"a": prev, "b": prev}, "required": ["a"]}
    return {"type": "object", "properties": {"root": {"$ref": f"#/$defs/L{levels}"}}, "$defs": defs}


def _nodes(node: object) -> int:
    if isinstance(node, dict):
        return 1 + sum(_nodes(v) for v in node.values())
    if isinstance(node, list):
        return 1 + sum(_nodes(v) for v in node)
    return 1


def test_exponential_defs_are_kept_compact_and_mean_the_same() -> None:
    schema = _exponential(40)  # 2**40 nodes if inlined
    out = inline_refs(schema, max_nodes=10_000)
    assert out["properties"]["root"] == {"$ref": "#/$defs/L40"}
    assert _nodes(out) <= _nodes(schema)
    bad = {"root": {"a": {"a": 5}}}
    for s in (schema, out):
        jsonschema.validate({}, s)
        for wrong in ({"root": {"b": {}}}, {"root": "x"}, bad):  # `a` is required at every level
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(wrong, s)
    small = _exponential(3)  # 2**3 copies fit the budget: inlined, no $defs left
    inlined = inline_refs(small)
    assert "$defs" not in inlined and _all_refs(inlined) == []
    for s in (small, inlined):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, s)


def test_budget_counts_output_not_input() -> None:
    schema = _exponential(6)  # about 2**7 nodes inlined, a few dozen written
    assert "$defs" not in inline_refs(schema, max_nodes=1_000)
    assert inline_refs(schema, max_nodes=100)["$defs"].keys() == {f"L{i}" for i in range(7)}


def test_a_schema_past_the_budget_even_compact_is_refused() -> None:
    from toolroute.schema import SchemaBudgetError

    deep: dict[str, object] = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(SchemaBudgetError, match="nested deeper than 64 levels"):
        inline_refs({"type": "object", "properties": {"d": deep}})
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(6_000)}}
    with pytest.raises(SchemaBudgetError, match="more than 10000 JSON values"):
        inline_refs(wide)
    very_deep: dict[str, object] = {}
    for _ in range(100_000):  # far past Python's recursion limit: still a clean refusal
        very_deep = {"not": very_deep}
    with pytest.raises(SchemaBudgetError):
        inline_refs(very_deep)


def test_definitions_and_defs_of_the_same_name_stay_apart() -> None:
    body = {"type": "string", "enum": [f"v{i}" for i in range(10)]}
    refs = {f"a{i}": {"$ref": "#/$defs/X"} for i in range(3)} | {f"b{i}": {"$ref": "#/definitions/X"} for i in range(3)}
    schema = {
        "type": "object",
        "properties": refs,
        "$defs": {"X": body},
        "definitions": {"X": {**body, "type": "integer"}},
    }
    out = inline_refs(schema, max_nodes=_nodes(schema))  # inlined it would be larger: kept compact
    assert out["$defs"] == {"X": body, "definitions.X": {**body, "type": "integer"}}
    assert out["properties"]["a0"] == {"$ref": "#/$defs/X"}
    assert out["properties"]["b2"] == {"$ref": "#/$defs/definitions.X"}
