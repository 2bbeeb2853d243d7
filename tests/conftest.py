from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _bash_helpers import bash_router
from _serve_helpers import outside_tmp

from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context


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
def _registry_key_outside_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The registry's default key file (`$XDG_CONFIG_HOME/toolroute/store.key`) in a folder of
    this session, so tests never write one into the home folder; subprocesses inherit it."""
    import os

    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))
    yield
    if saved is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = saved


@pytest.fixture
def deployed() -> Iterator[Path]:
    """A folder outside /tmp for one test (`outside_tmp`), removed afterwards."""
    import shutil

    folder = outside_tmp()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
