from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bash_helpers import bash_router
from _ci import fail_skips_ci_must_not_have, is_portable
from _serve_helpers import outside_tmp

from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context

# The tests' trees are small and quick to scan; they exercise the index as the trees it pays off
# for get it (started by the second scan). The default start policy has tests of its own
# (test_search_index_config.py), which clear this for the processes they start.
os.environ.setdefault("TOOLROUTE_SEARCH_INDEX_MIN_SCAN", "0")
# A slow first answer would start an index daemon that outlives the test (30 minutes); the
# daemon's tests (test_search_index_daemon.py) turn it on in the processes they start.
os.environ.setdefault("TOOLROUTE_SEARCH_INDEX_DAEMON", "0")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder (its parent, tmp_path, is outside it)."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def bash(ws: Path) -> Iterator[ToolRouter]:
    """A router whose built-ins act in `ws`, closed (and its processes ended) after the test."""
    with bash_router(ws) as router:
        yield router


@pytest.fixture
def ctx(ws: Path) -> Iterator[BuiltInToolContext]:
    context = BuiltInToolContext(ws)
    with builtin_tool_context(context):
        yield context


@pytest.fixture
def router(ctx: BuiltInToolContext) -> Iterator[ToolRouter]:
    r = ToolRouter()
    yield r
    r.close()


@pytest.fixture(scope="session", autouse=True)
def _host_folders_of_this_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The registry's default key file (`$XDG_CONFIG_HOME/toolroute/store.key`), the search
    index cache (`$XDG_CACHE_HOME/toolroute/index`) and the checkpoint stores
    (`$XDG_STATE_HOME/toolroute/checkpoints`) in folders of this session, so tests never
    write into the home folder; subprocesses inherit them."""
    import os

    names = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
    saved = {name: os.environ.get(name) for name in names}
    for name in names:
        os.environ[name] = str(tmp_path_factory.mktemp(name.lower()))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def deployed() -> Iterator[Path]:
    """A folder outside /tmp for one test (`outside_tmp`), removed afterwards."""
    import shutil

    folder = outside_tmp()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# Tests that start real services (PostgreSQL, HAProxy, several server replicas): marked `slow`
# here, in one place, so `python -m pytest -m "not slow"` is a quick local run (CI runs all).
SLOW_MODULES = frozenset({"test_serve_replicas", "test_serve_live_config", "test_serve_sharing"})
TESTS = Path(__file__).resolve().parent


def module_of(item: pytest.Item) -> str | None:
    """The path of an item's module under tests/ (`<stage>/test_x.py`), if it lies there."""
    try:
        return Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None


def pytest_addoption(parser: pytest.Parser) -> None:
    # CI's wheel check: every test is collected against the wheel (a collection error stops the
    # run), and only the named stages run; one pass instead of a collection and then a run.
    parser.addoption(
        "--stages",
        default=None,
        help="comma-separated stage folders (tests/<stage>/) to run; the others are collected, then deselected",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stages = config.getoption("--stages")
    if stages:
        wanted = set(stages.split(","))
        unknown = sorted(stage for stage in wanted if not (TESTS / stage).is_dir())
        if unknown:
            raise pytest.UsageError(f"--stages: no stage folder tests/{unknown[0]}/")
        left_out = [item for item in items if (module_of(item) or "").split("/")[0] not in wanted]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if (module_of(item) or "").split("/")[0] in wanted]
    for item in items:
        module = getattr(item, "module", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        uses_postgres = "postgres_dsn" in getattr(item, "fixturenames", ()) or "postgres" in params.values()
        if (module is not None and module.__name__ in SLOW_MODULES) or uses_postgres:
            item.add_marker(pytest.mark.slow)
        module_path = module_of(item)
        if module_path is not None and is_portable(module_path):
            item.add_marker(pytest.mark.portable)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    fail_skips_ci_must_not_have(outcome.get_result())
