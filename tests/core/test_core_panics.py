"""Rust must never surface a PanicException (a BaseException that escapes `except Exception`)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from toolroute import _core
from toolroute.errors import ToolError

hostile = st.text(alphabet=st.characters(codec="utf-8"), max_size=300) | st.sampled_from(
    ["", "\0", "user_", "user__tool_", "user_x_tool_", "_tool_" * 30, "é" * 100, "../" * 50, "/" * 10]
)


def _only_tool_errors(fn, *args) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(*args)
    except ToolError:
        pass  # a typed, catchable error is the right answer to hostile input
    except BaseException as exc:
        raise AssertionError(f"{fn.__name__}{args!r} raised {type(exc).__name__}: {exc}") from exc


@settings(max_examples=300)
@given(a=hostile, b=hostile)
def test_naming_and_routing_never_panic(a: str, b: str):
    for fn in (_core.generate_api_function_name, _core.encode_user_tool, _core.with_hash_suffix):
        _only_tool_errors(fn, a, b)
    for fn in (_core.sanitize_tool_name, _core.has_user_form, _core.validate_user_id, _core.is_valid_tool_name):
        _only_tool_errors(fn, a)
    table = _core.RouteTable()
    _only_tool_errors(table.insert, _core.ToolKind.FUNCTION, a, object())
    _only_tool_errors(table.plan, _core.ToolKind.GLOBAL_MCP, [(a, [b, a])])
    _only_tool_errors(table.plan_user, a, [(b, [a])])
    _only_tool_errors(_core.decode_user_tool, a)
    _only_tool_errors(_core.user_service_candidates, a, b)
    _only_tool_errors(table.insert_user, a, b, object())
    _only_tool_errors(table.resolve, a, b)
    _only_tool_errors(table.resolve, b, None)
    _only_tool_errors(table.suggest, a, b)
    _only_tool_errors(_core.ToolKind, 9)  # an unknown kind index


@settings(max_examples=200)
@given(path=hostile)
def test_confinement_never_panics(tmp_path_factory, path: str):  # type: ignore[no-untyped-def]
    root: Path = tmp_path_factory.getbasetemp()
    conf = _core.Confinement(root)
    _only_tool_errors(conf.resolve, path, False)
    _only_tool_errors(conf.resolve, path, True)
