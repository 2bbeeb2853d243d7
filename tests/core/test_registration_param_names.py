"""Typed function tools take every parameter name Python allows (issue 14, item 9).

Pydantic treats `_name` as private and refuses names that shadow `BaseModel` attributes; the
registration stores those under internal field names with the real name as the alias.
"""

from __future__ import annotations

import json
import keyword
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolroute import ToolArgumentError, ToolRouter, function_tool, mcp_service, mcp_tool

BASEMODEL_NAMES = sorted(n for n in dir(BaseModel) if n.isidentifier() and not keyword.iskeyword(n))


def _typed_function(names: list[str]) -> Any:
    """A plain function written as a user would, `def f(<names>: int) -> dict`, returning what it got."""
    params = ", ".join(f"{n}: int" for n in names)
    body = ", ".join(f"{n!r}: {n}" for n in names)
    namespace: dict[str, Any] = {}
    exec(f"def f({params}) -> dict:\n    return {{{body}}}\n", namespace)
    return namespace["f"]


def _call(router: ToolRouter, name: str, args: dict[str, Any]) -> Any:
    return json.loads(router.execute(name, args).text)


@pytest.mark.parametrize(
    "name", ["_from", "__x", "_", "model_config", "model_fields", "schema", "json", "copy", "dict"]
)
def test_a_reserved_looking_name_is_in_the_schema_and_reaches_the_function(name: str) -> None:
    fn = _typed_function([name, "to"])
    router = ToolRouter()
    router.register(function_tool(fn))
    params = router.get_all_tools(["f"])[0]["function"]["parameters"]
    assert list(params["properties"]) == [name, "to"]
    assert params["required"] == [name, "to"]
    assert params["additionalProperties"] is False
    assert _call(router, "f", {name: 1, "to": 2}) == {name: 1, "to": 2}


def test_the_internal_field_name_is_never_accepted() -> None:
    router = ToolRouter()
    router.register(function_tool(_typed_function(["_from"])))
    with pytest.raises(ToolArgumentError, match="_from: Field required"):
        router.execute("f", {"param_0": 1})


def test_an_internal_name_does_not_clash_with_a_real_parameter_of_that_name() -> None:
    router = ToolRouter()
    router.register(function_tool(_typed_function(["_a", "param_0", "param_0_"])))
    assert _call(router, "f", {"_a": 1, "param_0": 2, "param_0_": 3}) == {"_a": 1, "param_0": 2, "param_0_": 3}


def test_validation_errors_name_the_real_parameter() -> None:
    router = ToolRouter()
    router.register(function_tool(_typed_function(["_from"])))
    with pytest.raises(ToolArgumentError, match="_from: Input should be a valid integer"):
        router.execute("f", {"_from": "x"})


def test_positional_only_parameters_are_passed_by_position() -> None:
    @function_tool
    def pos(a: int, /, b: int) -> int:
        return a * 10 + b

    router = ToolRouter()
    router.register(pos)
    assert router.execute("pos", {"a": 1, "b": 2}).text == "12"


async def _async_fn(_from: int, model_config: str = "d") -> list[Any]:
    return [_from, model_config]


def test_async_functions_get_the_same_names() -> None:
    router = ToolRouter()
    router.register(function_tool(_async_fn))
    assert _call(router, "_async_fn", {"_from": 3}) == [3, "d"]


def test_local_mcp_tools_take_the_same_names() -> None:
    @mcp_service("svc")
    class Svc:
        @mcp_tool
        def go(self, _from: int, model_config: int = 5) -> list[int]:
            return [_from, model_config]

    router = ToolRouter()
    router.register(Svc)
    (tool,) = router.get_all_tools([], ["svc"])
    assert list(tool["function"]["parameters"]["properties"]) == ["_from", "model_config"]
    assert _call(router, tool["function"]["name"], {"_from": 1}) == [1, 5]


identifiers = st.one_of(
    st.from_regex(r"_{0,3}[A-Za-z][A-Za-z0-9_]{0,12}", fullmatch=True),
    st.from_regex(r"_[0-9_]{0,4}", fullmatch=True),
    st.sampled_from(BASEMODEL_NAMES),
    st.sampled_from(["param_0", "param_1", "param_0_", "ñame", "日本"]),
).filter(lambda s: s.isidentifier() and not keyword.iskeyword(s) and s != "f")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(identifiers, min_size=1, max_size=6, unique=True), data=st.data())
def test_any_identifier_round_trips(names: list[str], data: st.DataObject) -> None:
    router = ToolRouter()
    router.register(function_tool(_typed_function(names)))
    params = router.get_all_tools(["f"])[0]["function"]["parameters"]
    assert list(params["properties"]) == names
    values = {n: data.draw(st.integers(-(10**6), 10**6)) for n in names}
    assert _call(router, "f", values) == values
