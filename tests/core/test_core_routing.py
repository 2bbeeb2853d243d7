from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from _core_helpers import DictGateway, builtin_named
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import toolroute
from toolroute import (
    BuiltInToolContext,
    ToolArgumentError,
    ToolExecutionError,
    ToolKind,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolRouter,
    function_tool,
    mcp_service,
    mcp_tool,
)
from toolroute.naming import encode_user_tool
from toolroute.router import parse_arguments

NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@function_tool(name="shared")
def shared_function() -> str:
    return "function:shared"


@function_tool(name="fn_only")
def fn_only() -> str:
    return "function:fn_only"


@mcp_service("svc")
class SharedService:
    @mcp_tool(name="x")
    def shared(self) -> str:
        return "local-mcp:svc_x"


def layered_router() -> tuple[ToolRouter, DictGateway]:
    """Upstream servers advertising the names of every host tool (a built-in, a function, a
    local MCP tool) beside tools of their own."""
    gateway = DictGateway(
        services={"remote": ["shared", "svc_x", "read_file", "global_only", "create_issue"]},
        user_services={
            ("123", "gh"): ["create_issue", "read_file", "shared"],
            ("456", "gh"): ["create_issue"],
        },
    )
    router = ToolRouter(
        builtins={"read_file": builtin_named("read_file")},
        context=BuiltInToolContext(tempfile.gettempdir()),
    )
    for obj in (shared_function, fn_only, SharedService):
        router.register(obj)
    router.attach_gateway(gateway)
    return router, gateway


def test_host_names_are_reserved_against_shared_upstream_names_and_users_keep_theirs():
    r, _ = layered_router()
    assert r.invoke("read_file", {"path": "a"}) == "builtin:a"
    assert r.invoke("svc_x") == "local-mcp:svc_x"
    assert r.invoke("shared") == "function:shared"
    # the upstream tools that wanted those names are exposed service-qualified instead
    assert r.invoke("remote_read_file") == "global:remote:read_file"
    assert r.invoke("remote_svc_x") == "global:remote:svc_x"
    assert r.invoke("remote_shared") == "global:remote:shared"
    assert r.invoke("global_only") == "global:remote:global_only"
    assert r.invoke("create_issue") == "global:remote:create_issue"
    # a user's tools keep their own names (the prefix sets them apart from every host tool),
    # and with an explicit user id they come right after the built-ins (spec 5)
    assert r.invoke("user_123_tool_create_issue") == "user:123:gh:create_issue"
    assert r.invoke("create_issue", {}, user_id="123") == "user:123:gh:create_issue"  # explicit user id
    assert r.invoke("user_123_tool_shared") == "user:123:gh:shared"
    assert r.invoke("shared", {}, user_id="123") == "user:123:gh:shared"  # before the function tool
    assert r.invoke("shared", {}) == "function:shared"  # without a user id: the shared levels
    assert r.invoke("shared", {}, user_id="456") == "function:shared"  # another user: theirs, or shared
    # built-in still first even for a user that has a same-named tool
    assert r.invoke("read_file", {"path": "b"}, user_id="123") == "builtin:b"
    assert r.invoke("user_123_tool_read_file") == "user:123:gh:read_file"


def test_a_function_named_like_a_builtin_is_refused():
    r = ToolRouter(builtins={"grep": builtin_named("grep")})

    @function_tool(name="grep")
    def my_grep() -> str:
        return "mine"

    with pytest.raises(ToolRegistrationError, match="name of a built-in tool"):
        r.register(my_grep)
    with pytest.raises(ToolRegistrationError, match="name of a built-in tool"):
        ToolRouter().register(my_grep)


def test_user_form_never_falls_back():
    r, gw = layered_router()
    with pytest.raises(ToolNotFoundError):
        r.invoke("user_999_tool_create_issue")  # user 999 has nothing: no global fallback
    with pytest.raises(ToolNotFoundError):
        r.invoke("user_123_tool_create_issue", user_id="456")  # name of another tenant
    with pytest.raises(ToolNotFoundError):
        r.invoke("user_123_tool_global_only")
    assert all(target[0] != "global" or target[2] != "create_issue" for target, _ in gw.calls)


def test_execute_returns_trace_and_traits():
    r, _ = layered_router()
    out = r.execute("read_file", {"path": "x"})
    assert out.text == "builtin:x" and out.trace == {"level": "builtin"}
    assert r.traits("read_file").read_only
    assert not r.traits("global_only").read_only


def test_ainvoke_follows_the_same_precedence():
    r, _ = layered_router()

    async def main() -> list[str]:
        return [
            await r.ainvoke("read_file", {"path": "z"}),
            await r.ainvoke("svc_x"),
            await r.ainvoke("shared"),
            await r.ainvoke("user_123_tool_create_issue"),
        ]

    assert asyncio.run(main()) == ["builtin:z", "local-mcp:svc_x", "function:shared", "user:123:gh:create_issue"]


def test_allowlist_exposes_exactly_what_was_asked():
    r, _ = layered_router()
    names = [t["function"]["name"] for t in r.get_all_tools(["fn_only"], ["remote"])]
    assert names == ["fn_only", "remote_shared", "remote_svc_x", "remote_read_file", "global_only", "create_issue"]
    assert [t["function"]["name"] for t in r.get_all_tools(["fn_only"])] == ["fn_only"]
    assert r.get_all_tools() == []
    user = [t["function"]["name"] for t in r.get_all_tools([], ["gh"], user_id="123")]
    assert user == ["user_123_tool_create_issue", "user_123_tool_read_file", "user_123_tool_shared"]
    ai4j_form = [t["function"]["name"] for t in r.get_all_tools([], ["user_456_service_gh"])]
    assert ai4j_form == ["user_456_tool_create_issue"]
    local = [t["function"]["name"] for t in r.get_all_tools([], ["svc"])]
    assert local == ["svc_x"]
    for tool in r.get_all_tools(["fn_only", "read_file"], ["remote", "svc"]):
        assert NAME_RULE.match(tool["function"]["name"])


def test_allowlist_unknown_names_are_errors():
    r, _ = layered_router()
    with pytest.raises(ToolNotFoundError, match="did you mean 'fn_only'"):
        r.get_all_function_tools(["fn_onyl"])
    with pytest.raises(ToolNotFoundError, match="no such MCP service"):
        r.get_all_tools([], ["nope"])
    with pytest.raises(ToolArgumentError, match="another user"):
        r.get_all_tools([], ["user_456_service_gh"], user_id="123")
    with pytest.raises(ToolNotFoundError, match="no MCP gateway"):
        ToolRouter(builtins={}).get_all_tools([], ["remote"])


def test_not_found_suggests_close_names_but_never_other_tenants():
    r, _ = layered_router()
    with pytest.raises(ToolNotFoundError) as exc:
        r.invoke("fn_onl")
    assert "fn_only" in exc.value.suggestions
    with pytest.raises(ToolNotFoundError) as exc:
        r.invoke("user_456_tool_create_issu", user_id="456")
    assert exc.value.suggestions == ("user_456_tool_create_issue",)
    with pytest.raises(ToolNotFoundError) as exc:
        r.invoke("user_456_tool_create_issu", user_id="123")
    assert all("456" not in s for s in exc.value.suggestions)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_arguments_parse_as_json_loads_parses_them(value):
    text = json.dumps({"v": value})
    assert parse_arguments(text) == json.loads(text)
    escaped = json.dumps({"v": value}, ensure_ascii=True)
    assert parse_arguments(escaped) == json.loads(escaped)


def test_arguments_json_loads_takes_that_the_fast_parser_refuses():
    assert parse_arguments('{"v": "\\ud800"}') == {"v": "\ud800"}  # a lone surrogate escape


def test_errors_are_typed_and_actionable():
    r, _ = layered_router()
    with pytest.raises(ToolArgumentError, match="not valid JSON"):
        r.invoke("fn_only", "{oops")
    with pytest.raises(ToolArgumentError, match="must be a JSON object"):
        r.invoke("fn_only", "[1, 2]")
    with pytest.raises(ToolArgumentError, match=r"nope: Extra inputs are not permitted"):
        r.invoke("read_file", {"nope": 1})

    @function_tool(name="boom")
    def boom() -> None:
        raise RuntimeError("disk on fire")

    r.register(boom)
    with pytest.raises(ToolExecutionError, match="disk on fire") as exc:
        r.invoke("boom")
    assert isinstance(exc.value.__cause__, RuntimeError)
    for cls in (ToolArgumentError, ToolExecutionError, ToolNotFoundError, ToolRegistrationError):
        assert issubclass(cls, toolroute.ToolError)


def test_registration_errors():
    r, _ = layered_router()
    assert r.register(fn_only) == ["fn_only"]  # the same object again: idempotent

    @function_tool(name="fn_only")
    def impostor() -> str:
        return "impostor"

    with pytest.raises(ToolRegistrationError, match="already registered"):
        r.register(impostor)
    assert r.invoke("fn_only") == "function:fn_only"
    r.register(impostor, replace=True)
    assert r.invoke("fn_only") == "impostor"

    @function_tool(name="user_1_tool_x")
    def reserved() -> None: ...

    with pytest.raises(ToolRegistrationError, match="user form"):
        r.register(reserved)

    @function_tool(name="bad name!")
    def illegal() -> None: ...

    with pytest.raises(ToolRegistrationError, match="must match"):
        r.register(illegal)
    with pytest.raises(ToolRegistrationError, match="not decorated"):
        r.register(object())
    with pytest.raises(ToolRegistrationError, match="type hint"):

        @function_tool
        def untyped(x): ...  # type: ignore[no-untyped-def]

    with pytest.raises(ToolArgumentError, match="user id"):
        r.invoke("x", {}, user_id="bad id")


class Point(BaseModel):
    x: int
    y: int


def test_local_mcp_per_parameter_conversion_and_colliding_names():
    @mcp_service("geo.svc")
    class Geo:
        @mcp_tool
        def shift(self, p: Point, dx: int = 0) -> dict[str, int]:
            return {"x": p.x + dx, "y": p.y}

    @mcp_service("geo svc")
    class Geo2:
        @mcp_tool(name="shift")
        def other(self) -> str:
            return "second"

    r = ToolRouter(builtins={})
    (first,) = r.register(Geo)
    (second,) = r.register(Geo2)
    assert first == "geo_svc_shift" and second != first and NAME_RULE.match(second)
    assert r.invoke(first, {"p": {"x": "1", "y": 2}, "dx": "5"}) == '{"x":6,"y":2}'
    assert r.invoke(second) == "second"
    with pytest.raises(ToolArgumentError, match="dx"):
        r.invoke(first, {"p": {"x": 1, "y": 2}, "dx": "five"})
    with pytest.raises(ToolArgumentError, match="unknown parameter"):
        r.invoke(first, {"p": {"x": 1, "y": 2}, "zz": 1})
    with pytest.raises(ToolArgumentError, match="p: Field required"):
        r.invoke(first, {})


def test_async_tools_run_from_sync_and_async_callers():
    @function_tool
    async def slow_double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    r = ToolRouter(builtins={})
    r.register(slow_double)
    assert r.invoke("slow_double", {"n": 4}) == "8"

    async def inside_loop() -> tuple[str, str]:
        # a sync invoke from inside a running loop must not deadlock
        return r.invoke("slow_double", {"n": 1}), await r.ainvoke("slow_double", {"n": 2})

    assert asyncio.run(inside_loop()) == ("2", "4")


def test_scan_finds_tools_in_a_package_outside_toolroute_once():
    r = ToolRouter(builtins={}, packages=["sample_tools"])
    names = [t["function"]["name"] for t in r.get_all_function_tools(["get_weather", "add", "echo_text"])]
    assert names == ["get_weather", "add", "echo_text"]
    assert r.invoke("add", {"a": 40}) == "42"
    assert r.invoke("echo_text", {"text": "hi"}) == "hi"  # a str result passes through unquoted
    assert r.invoke("get_weather", {"location": {"city": "Delft"}}) == (
        '{"city":"Delft","unit":"celsius","days":1,"temp":21}'
    )
    assert r.invoke("forecast_service_rain", {"city": "Delft", "days": "3"}) == '{"city":"Delft","days":3,"chance":40}'
    r.scan("sample_tools")  # a second scan is a no-op, not a duplicate registration
    assert r.traits("get_weather").read_only and r.traits("get_weather").idempotent
    with pytest.raises(ToolNotFoundError):
        r.get_all_function_tools(["not_a_tool"])
    # nothing is exposed unless asked, even though it was scanned
    assert r.get_all_tools() == []


def test_entry_point_plugins_are_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    plugin = tmp_path / "plugin_tools.py"
    plugin.write_text(
        textwrap.dedent(
            """
            from toolroute import function_tool

            @function_tool
            def plugin_ping() -> str:
                return "pong"
            """
        )
    )
    dist = tmp_path / "plugin_tools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[toolroute.tools]\nplugin = plugin_tools\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    r = ToolRouter(builtins={}, entry_points=True)
    assert r.invoke("plugin_ping") == "pong"
    assert ToolRouter(builtins={}).get_all_tools() == []
    with pytest.raises(ToolNotFoundError):
        ToolRouter(builtins={}).invoke("plugin_ping")  # plugins only when asked for
    sys.modules.pop("plugin_tools", None)


def test_default_router_static_style():
    previous = toolroute.set_default_router(ToolRouter(builtins={}))
    try:
        toolroute.default_router().register(fn_only)
        assert toolroute.invoke("fn_only") == "function:fn_only"
        assert [t["function"]["name"] for t in toolroute.get_all_tools(["fn_only"])] == ["fn_only"]
        assert asyncio.run(toolroute.ainvoke("fn_only")) == "function:fn_only"
    finally:
        toolroute.set_default_router(previous)


def test_closed_router_refuses_calls():
    r, gw = layered_router()
    closed: list[bool] = []
    r.on_close(lambda: closed.append(True))
    r.close()
    assert closed == [True] and gw.closed
    with pytest.raises(ToolExecutionError, match="closed"):
        r.invoke("fn_only")


def test_kinds_are_stable_and_defined_once_in_rust():
    assert [k.value for k in ToolKind.all()] == [0, 1, 2, 3, 4]
    assert [k.name for k in ToolKind.all()] == ["BUILTIN", "USER_MCP", "LOCAL_MCP", "FUNCTION", "GLOBAL_MCP"]
    assert ToolKind(3) == ToolKind.FUNCTION and ToolKind(ToolKind.BUILTIN) == ToolKind.BUILTIN
    assert type(ToolKind.BUILTIN).__module__ == "toolroute._core"


# ---- tenant isolation, property-based ---------------------------------------------------

user_ids = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
tool_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    owner=user_ids,
    intruder=user_ids,
    tool=tool_names,
    probe=st.one_of(tool_names, st.text(max_size=40)),
)
def test_no_name_reaches_another_tenants_tool(owner: str, intruder: str, tool: str, probe: str):
    gateway = DictGateway(services={"g": ["global_tool"]}, user_services={(owner, "s"): [tool]})
    r = ToolRouter(builtins={}, gateway=gateway)
    owner_name = encode_user_tool(owner, tool)
    # the intruder, asking by any name, never lands on the owner's tool
    for name in (probe, owner_name, tool, encode_user_tool(intruder, tool)):
        if intruder == owner:
            continue
        try:
            r.invoke(name, {}, user_id=intruder)
        except (ToolNotFoundError, ToolArgumentError):
            continue
        target = gateway.calls[-1][0]
        assert target[0] == "global", (name, target)
    # a user-form name never falls back to a global tool
    gateway.calls.clear()
    with contextlib.suppress(ToolNotFoundError):
        r.invoke(f"user_{intruder}_tool_global_tool", {})
    assert not gateway.calls or gateway.calls[-1][0][0] == "user"
    # and the owner does reach it
    assert r.invoke(owner_name, {}).startswith(f"user:{owner}:s:")


def test_quick_sync_tools_run_inline_for_async_callers():
    import threading

    seen: list[str] = []

    @function_tool(name="where_quick", quick=True)
    def where_quick() -> str:
        seen.append(threading.current_thread().name)
        return "q"

    @function_tool(name="where_slow")
    def where_slow() -> str:
        seen.append(threading.current_thread().name)
        return "s"

    r = ToolRouter(builtins={})
    r.register(where_quick)
    r.register(where_slow)
    assert r.traits("where_quick").quick and not r.traits("where_slow").quick

    async def main() -> str:
        await r.ainvoke("where_quick")
        await r.ainvoke("where_slow")
        return threading.current_thread().name

    loop_thread = asyncio.run(main())
    assert seen[0] == loop_thread and seen[1] != loop_thread


@dataclass
class Corner:
    x: int
    y: int


def test_json_text_calls_answer_as_mapping_calls_do():
    """`invoke` with JSON text takes a one-pass path (no parse, no thunk for a plain sync tool):
    every kind of function tool answers there as it does from a mapping, a tool's own failure
    is still wrapped, text that does not validate gets the general path's worded error, and a
    closed router refuses it."""

    @function_tool
    def plain(a: int, b: int) -> int:
        return a + b

    @function_tool
    async def later(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a * b

    @function_tool
    def shaped(a: int, b: int) -> Corner:
        return Corner(a, b)

    @function_tool
    def broken(a: int) -> int:
        raise KeyError(a)

    r = ToolRouter(builtins={})
    r.register_all([plain, later, shaped, broken])
    for name in ("plain", "later", "shaped"):
        text = r.execute(name, '{"a": 3, "b": 4}')
        assert text == r.execute(name, {"a": 3, "b": 4})
    assert r.invoke("plain", '{"a": 3, "b": 4}') == "7"
    assert r.invoke("later", '{"a": 3, "b": 4}') == "12"
    assert json.loads(r.invoke("shaped", '{"a": 3, "b": 4}')) == {"x": 3, "y": 4}
    assert r.execute("shaped", '{"a": 3, "b": 4}').trace["structured_content"] == {"x": 3, "y": 4}
    with pytest.raises(ToolExecutionError, match="KeyError") as failed:
        r.invoke("broken", '{"a": 1}')
    assert isinstance(failed.value.__cause__, KeyError)
    with pytest.raises(ToolArgumentError, match="b: Field required"):
        r.invoke("plain", '{"a": 3}')
    with pytest.raises(ToolArgumentError, match="not valid JSON"):
        r.invoke("plain", '{"a": 3,')
    r.close()
    with pytest.raises(ToolExecutionError, match="closed"):
        r.invoke("plain", '{"a": 3, "b": 4}')
