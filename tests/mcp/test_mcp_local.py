"""Local `@mcp_service` tools (spec 8): in-process, each argument converted by its parameter's type."""

from __future__ import annotations

import asyncio
from datetime import date

import pytest
from _mcp_helpers import demo_stdio
from pydantic import BaseModel

from toolroute import ToolRouter, mcp_service, mcp_tool
from toolroute.errors import ToolArgumentError
from toolroute.mcp import McpGateway


class Point(BaseModel):
    x: int
    y: int


@mcp_service("geo", description="Geometry helpers")
class Geo:
    @mcp_tool(description="Manhattan distance of a point from the origin, scaled")
    def distance(self, point: Point, scale: int = 1) -> dict[str, object]:
        return {"kind": type(point).__name__, "value": (abs(point.x) + abs(point.y)) * scale}

    @mcp_tool()
    def weekday(self, day: date) -> str:
        return day.strftime("%A")

    @mcp_tool(name="count.items")
    async def count(self, items: list[int]) -> int:
        await asyncio.sleep(0)
        return sum(items)


@mcp_service("calc")
class Calc:
    @mcp_tool()
    def add(self, a: int, b: int) -> str:
        return f"local:{a + b}"


@pytest.fixture
def router() -> ToolRouter:
    r = ToolRouter()
    r.register(Geo)
    return r


def test_strings_become_ints_and_dicts_become_models(router: ToolRouter) -> None:
    out = router.invoke("geo_distance", {"point": {"x": "3", "y": -4}, "scale": "5"})
    assert out == '{"kind":"Point","value":35}'


def test_json_string_arguments_and_defaults(router: ToolRouter) -> None:
    assert router.invoke("geo_distance", '{"point": {"x": 1, "y": 1}}') == '{"kind":"Point","value":2}'
    assert router.invoke("geo_weekday", {"day": "2026-12-02"}) == "Wednesday"


def test_async_methods_and_sanitised_names(router: ToolRouter) -> None:
    assert router.invoke("geo_count_items", {"items": ["1", 2, 3]}) == "6"

    async def main() -> str:
        return await router.ainvoke("geo_count_items", {"items": [4]})

    assert asyncio.run(main()) == "4"


def test_bad_arguments_name_the_parameter(router: ToolRouter) -> None:
    with pytest.raises(ToolArgumentError, match="scale"):
        router.invoke("geo_distance", {"point": {"x": 1, "y": 1}, "scale": "many"})
    with pytest.raises(ToolArgumentError, match="point: Field required"):
        router.invoke("geo_distance", {})
    with pytest.raises(ToolArgumentError, match="unknown parameter"):
        router.invoke("geo_weekday", {"day": "2026-12-02", "extra": 1})


def test_local_definitions_are_self_contained(router: ToolRouter) -> None:
    tools = router.get_all_tools(mcp_server_ids=["geo"])
    distance = next(t["function"] for t in tools if t["function"]["name"] == "geo_distance")
    assert distance["parameters"]["properties"]["point"]["properties"]["x"]["type"] == "integer"
    assert "$ref" not in str(distance)


def test_a_global_gateway_tool_never_takes_a_local_mcp_tools_name() -> None:
    with McpGateway({"remote": demo_stdio("remote", "calc_add", "only_remote")}, eager=True) as gw:
        assert "calc_add" in gw.global_tool_names()  # alone, the gateway names it plainly
        router = ToolRouter(gateway=gw)
        router.register(Calc)
        assert router.invoke("calc_add", {"a": "2", "b": 3}) == "local:5"  # the host's own tool
        assert "calc_add" not in gw.global_tool_names()
        assert router.invoke("remote_calc_add") == "remote:calc_add"  # the upstream one, renamed
        assert router.invoke("only_remote") == "remote:only_remote"
        mixed = {t["function"]["name"] for t in router.get_all_tools(mcp_server_ids=["calc", "remote"])}
        assert {"calc_add", "remote_calc_add", "only_remote", "echo"} <= mixed
