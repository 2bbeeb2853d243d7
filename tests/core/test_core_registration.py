"""Registration is all-or-nothing per unit (module, service, entry point) and idempotent (issue 14
items 10 and 12): a failure names the module and the cause and leaves nothing half-registered."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from toolroute import (
    BuiltInToolContext,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolRouter,
    function_tool,
    mcp_service,
    mcp_tool,
)
from toolroute._core import ToolKind
from toolroute.builtins import BUILTIN_TOOL_NAMES


def make_package(root: Path, files: dict[str, str]) -> str:
    """A fresh importable package under `root` (a unique name, so tests never share modules)."""
    name = f"regpkg_{uuid.uuid4().hex[:8]}"
    for rel, text in files.items():
        path = root / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for folder in {p.parent for p in (root / name).rglob("*.py")}:
        (folder / "__init__.py").touch()
    return name


TOOL = """
from toolroute import function_tool

@function_tool
def {name}() -> str:
    return "{name}"
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_failing_on_import_is_named_every_time_never_silently_skipped(root: Path) -> None:
    pkg = make_package(
        root,
        {
            "a.py": TOOL.format(name="tool_a"),
            "b.py": "raise RuntimeError('broken plugin')\n",
            "c.py": TOOL.format(name="tool_c"),
        },
    )
    router = ToolRouter(builtins={}, packages=[pkg])
    for _ in range(2):
        with pytest.raises(ToolRegistrationError, match=rf"{pkg}\.b.*RuntimeError: broken plugin"):
            router.get_all_tools(["tool_a"])


def test_a_module_is_one_unit(root: Path) -> None:
    pkg = make_package(
        root,
        {
            "m.py": """
            from toolroute import function_tool

            @function_tool
            def fine() -> str:
                return "fine"

            @function_tool(name="bash")
            def impostor() -> str:
                return "impostor"
            """
        },
    )
    router = ToolRouter(packages=[pkg])
    with pytest.raises(ToolRegistrationError, match=rf"module '{pkg}\.m'.*name of a built-in tool"):
        router.ensure_initialized()
    with pytest.raises((ToolNotFoundError, ToolRegistrationError)):
        router.invoke("fine")  # the module's other tool was rolled back


def test_scanning_is_idempotent_and_overlaps_are_harmless(root: Path) -> None:
    pkg = make_package(root, {"top.py": TOOL.format(name="top_tool"), "sub/inner.py": TOOL.format(name="inner_tool")})
    router = ToolRouter(builtins={}, packages=[pkg])
    inner = sys.modules.get(f"{pkg}.sub.inner")
    assert inner is None  # nothing imported before first use
    import importlib

    obj = importlib.import_module(f"{pkg}.sub.inner").inner_tool
    assert router.register(obj) == ["inner_tool"]  # registered before the package scan
    assert router.invoke("top_tool") == "top_tool"
    router.scan(f"{pkg}.sub")  # after scan(pkg): a no-op, not a duplicate
    router.scan(pkg)
    assert router.register(obj) == ["inner_tool"]
    assert router.invoke("inner_tool") == "inner_tool"


def test_a_failing_mcp_service_leaves_none_of_its_tools_routable() -> None:
    @mcp_service("half")
    class Half:
        @mcp_tool
        def good(self) -> str:
            return "good"

        @mcp_tool
        def bad(self, x) -> str:  # type: ignore[no-untyped-def]  # no type hint: cannot be a schema
            return "bad"

    router = ToolRouter(builtins={})
    with pytest.raises(ToolRegistrationError, match="type hint"):
        router.register(Half)
    with pytest.raises(ToolNotFoundError):
        router.invoke("half_good")
    assert router.get_all_tools([], []) == []


def test_entry_points_overlapping_a_module_scan_do_not_break_invoke(root: Path) -> None:
    pkg = make_package(root, {"tools.py": TOOL.format(name="plugged")})
    dist = root / "plugged-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[toolroute.tools]\nmodule = {pkg}.tools\nobject = {pkg}.tools:plugged\n")
    router = ToolRouter(entry_points=True)
    assert router.invoke("plugged") == "plugged"
    assert router.get_all_tools(["read_file"])  # built-ins still there


def test_definitions_are_cached_and_registration_shows_at_once() -> None:
    """get_all_tools reuses each tool's definition (a copy a caller may change), and a tool
    registered or replaced later is listed with its own definition on the next call."""
    router = ToolRouter()
    names = list(BUILTIN_TOOL_NAMES)
    first = router.get_all_tools(names)
    first[0]["function"]["description"] = "changed by a caller"
    assert router.get_all_tools(names) == ToolRouter().get_all_tools(names)

    @function_tool(name="lookup", description="the first")
    def lookup(key: str) -> str:
        return key

    router.register(lookup)
    listed = router.get_all_tools([*names, "lookup"])
    assert [d["function"]["name"] for d in listed] == [*names, "lookup"]
    assert listed[-1]["function"]["description"] == "the first"

    @function_tool(name="lookup", description="the second")
    def lookup_again(key: str, default: str = "") -> str:
        return key or default

    router.register(lookup_again, replace=True)
    again = router.get_all_tools(["lookup"])[0]["function"]
    assert again["description"] == "the second"
    assert set(again["parameters"]["properties"]) == {"key", "default"}


# ---- renaming at registration: a tool set with a method named like a built-in -----------------


def _gorilla_file_system() -> list[object]:
    """Three of BFCL's GorillaFileSystem methods, one named like the built-in `grep`."""

    @function_tool(name="ls")
    def ls(a: bool = False) -> str:
        return "gfs:ls"

    @function_tool(name="grep")
    def grep(file_name: str, pattern: str) -> str:
        return f"gfs:grep:{pattern}"

    @function_tool(name="cat")
    def cat(file_name: str) -> str:
        return "gfs:cat"

    return [ls, grep, cat]


def test_a_tool_set_clashing_with_a_builtin_is_refused_whole_by_default(tmp_path: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(tmp_path))
    with pytest.raises(ToolRegistrationError, match="grep"):
        router.register_all(_gorilla_file_system())
    assert router.route("ls") is None and router.route("cat") is None  # none of them registered


def test_a_rename_map_registers_the_rest_beside_the_builtin(tmp_path: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(tmp_path))
    assert router.register_all(_gorilla_file_system(), rename={"grep": "gfs_grep"}) == ["ls", "gfs_grep", "cat"]
    assert router.invoke("gfs_grep", {"file_name": "f", "pattern": "x"}) == "gfs:grep:x"
    assert router.route("grep").kind == ToolKind.BUILTIN  # type: ignore[union-attr]
    assert router.invoke("ls") == "gfs:ls"


def test_a_prefix_renames_every_function_tool_of_the_unit(tmp_path: Path) -> None:
    router = ToolRouter(context=BuiltInToolContext(tmp_path))
    tools = _gorilla_file_system()
    assert router.register_all(tools, prefix="gfs_") == ["gfs_ls", "gfs_grep", "gfs_cat"]
    assert router.register(tools[0], prefix="gfs_") == ["gfs_ls"]  # the same again: a no-op
    assert router.invoke("gfs_cat", {"file_name": "f"}) == "gfs:cat"
