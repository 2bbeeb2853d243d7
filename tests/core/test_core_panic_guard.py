"""Every entry point of the compiled core runs behind the one panic guard: a panic in any of them
(forced here by TOOLROUTE_CORE_FORCE_PANIC=1, read once per process) surfaces as toolroute's
ToolExecutionError, an Exception, never as pyo3's PanicException, a BaseException that would
escape the router's `except Exception` and kill the agent's loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from toolroute import _core

# One call per function of `_core`, and per method of its classes that does work, by binding
# module (rust/binding/src/*.rs). `conf`, `grep`, `glob` and `table` are made before the panics are
# switched on (see CHILD).
CALLS: dict[str, str] = {
    # naming.rs
    "generate_api_function_name": "_core.generate_api_function_name('svc', 'tool')",
    "generate_api_function_names": "_core.generate_api_function_names([('svc', 'tool')])",
    "sanitize_tool_name": "_core.sanitize_tool_name('a b')",
    "is_valid_tool_name": "_core.is_valid_tool_name('ok')",
    "with_hash_suffix": "_core.with_hash_suffix('name', 'raw')",
    "encode_user_tool": "_core.encode_user_tool('u1', 'tool')",
    "validate_user_id": "_core.validate_user_id('u1')",
    "has_user_form": "_core.has_user_form('user_u1_tool_x')",
    "decode_user_tool": "_core.decode_user_tool('user_u1_tool_x')",
    "user_tool_owners": "_core.user_tool_owners('user_u1_tool_x', ['u1'])",
    "user_service_key": "_core.user_service_key('u1', 'svc')",
    "user_service_candidates": "_core.user_service_candidates('user_u1_service_svc')",
    # textsafety.rs
    "neutralize_text": "_core.neutralize_text('text')",
    # files.rs
    "Confinement": "_core.Confinement(ws)",
    "Confinement.resolve": "conf.resolve('a.txt')",
    "Confinement.recover": "conf.recover()",
    "read_page": "_core.read_page(conf, 'a.txt', 1, 10, 1000)",
    "read_file_head": "_core.read_file_head(conf, 'a.txt', 100)",
    "write_file_text": "_core.write_file_text(conf, 'b.txt', 'x', 'overwrite', 1000)",
    "write_file_bytes": "_core.write_file_bytes(conf, 'e.bin', b'\\xff\\x00', 'create', 1000)",
    "edit_file": "_core.edit_file(conf, 'a.txt', 'needle', 'pin', False, 1000)",
    "apply_patch": "_core.apply_patch(conf, '*** Begin Patch\\n*** Add File: c.txt\\n+c\\n*** End Patch', 1000)",
    "apply_v4a": "_core.apply_v4a(conf, [PatchOperation(type='create_file', path='d.txt', diff='+d')], 1000)",
    "apply_update_to_text": (
        "_core.apply_update_to_text('*** Begin Patch\\n*** Update File: a\\n@@\\n-a\\n+b\\n*** End Patch', 'a\\n')"
    ),
    "edit_bytes": "_core.edit_bytes(b'abc', 'b', 'x', False)",
    # search.rs
    "grep": "_core.grep(conf, GrepRequest(pattern='needle'), max_line_bytes=100)",
    "glob": "_core.glob(conf, GlobRequest(pattern='*.txt'))",
    "search_index_warm": "_core.search_index_warm(conf, timeout=0.1)",
    "search_index_stats": "_core.search_index_stats(conf)",
    "GrepResult.rows": "found.rows()",
    "GrepResult.render": "found.render(0, None, 1000, 100)",
    "GrepResult.paths": "found.paths()",
    "GrepResult.total": "found.total",
    "GrepResult.match_lines": "found.match_lines",
    "GlobResult.paths": "listed.paths()",
    "GlobResult.modified": "listed.modified()",
    "search_daemon_command": "_core.search_daemon_command([sys.executable, '-m', 'toolroute.search_daemon'])",
    "search_daemon_answered": "_core.search_daemon_answered()",
    "search_daemon_stop": "_core.search_daemon_stop()",  # none answers: False
    # Serves for its TTL (0 here: one tick) in the child's own cache folder, then returns.
    "search_daemon_serve": "_core.search_daemon_serve('daemon-00.sock')",
    "set_search_index_default": "_core.set_search_index_default('texts', 1000)",
    # toolsearch.rs
    "ToolSearchIndex": "_core.ToolSearchIndex([('t', '', 'd', [])])",
    "ToolSearchIndex.search": "_core.ToolSearchIndex([('t', '', 'd', [])]).search('t', 5)",
    "ToolSearchIndex.search_regex": "_core.ToolSearchIndex([('t', '', 'd', [])]).search_regex('t', 5)",
    # routing.rs
    "ToolKind": "_core.ToolKind(0)",
    "RouteTable.insert": "table.insert(_core.ToolKind(3), 'f', object())",
    "RouteTable.plan": "table.plan(_core.ToolKind(3), [('id', ['g'])])",
    "RouteTable.plan_user": "table.plan_user('u1', [('id', ['g'])])",
    "RouteTable.insert_user": "table.insert_user('u1', 'g', object())",
    "RouteTable.remove": "table.remove('f')",
    "RouteTable.remove_user": "table.remove_user('u1', 'g')",
    "RouteTable.user_entry": "table.user_entry('user_u1_tool_g')",
    "RouteTable.holder": "table.holder('f')",
    "RouteTable.resolve": "table.resolve('f')",
    "RouteTable.names": "table.names(_core.ToolKind(3))",
    "RouteTable.suggest": "table.suggest('f')",
}

# The objects the method calls need are made first; then the hook (present only under
# TOOLROUTE_CORE_TEST_HOOKS=1) makes every guarded entry point panic.
CHILD = """
import json, sys
from toolroute import _core
from toolroute.builtins.glob import GlobRequest
from toolroute.builtins.grep import GrepRequest
from toolroute.builtins.patch_operation import PatchOperation
from toolroute.errors import ToolExecutionError

ws = sys.argv[1]
conf = _core.Confinement(ws)
found = _core.grep(conf, GrepRequest(pattern="needle"), max_line_bytes=100)
listed = _core.glob(conf, GlobRequest(pattern="*.txt"))
table = _core.RouteTable()
_core._force_panics(sys.argv[3] == "on")
outcome = {}
for name, expr in json.loads(sys.argv[2]).items():
    try:
        eval(expr)
    except ToolExecutionError as exc:
        internal = "internal error in toolroute's core" in str(exc)
        outcome[name] = "guarded" if internal else f"ToolExecutionError: {exc}"
    except BaseException as exc:  # pyo3's PanicException is a BaseException
        outcome[name] = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    else:
        outcome[name] = "returned"
print(json.dumps(outcome))
"""


def run_child(tmp_path: Path, panics: str) -> dict[str, str]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "a.txt").write_text("a needle\n")
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "TOOLROUTE_CORE_TEST_HOOKS": "1",
        "TOOLROUTE_SEARCH_INDEX_CACHE": str(cache),
        "TOOLROUTE_SEARCH_INDEX_DAEMON_TTL": "0",
    }
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(ws), json.dumps(CALLS), panics],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    outcome: dict[str, str] = json.loads(child.stdout)
    return outcome


def test_a_panic_in_any_entry_point_is_a_toolroute_error(tmp_path: Path) -> None:
    outcome = run_child(tmp_path, "on")
    assert {name: what for name, what in outcome.items() if what != "guarded"} == {}
    assert outcome.keys() == CALLS.keys()


def test_the_calls_work_without_the_hook(tmp_path: Path) -> None:
    """The table's calls are real calls: with the hook off each returns normally, so the guarded
    outcome above is the guard's doing and not a bad argument."""
    outcome = run_child(tmp_path, "off")
    assert {name: what for name, what in outcome.items() if what != "returned"} == {}


def test_the_hook_is_absent_from_a_normal_process() -> None:
    assert not hasattr(_core, "_force_panics")


def test_every_function_of_the_core_is_listed() -> None:
    """A new entry point without a row here fails: the guard test must cover it."""
    public = {n for n in dir(_core) if not n.startswith("_") and callable(getattr(_core, n))}
    functions = {n for n in public if not isinstance(getattr(_core, n), type)}
    assert functions - CALLS.keys() == set()
    # Classes whose construction or methods do work; the result classes only hand out fields.
    for cls in ("Confinement", "ToolKind", "RouteTable", "GrepResult", "GlobResult", "ToolSearchIndex"):
        assert any(k == cls or k.startswith(f"{cls}.") for k in CALLS), cls
