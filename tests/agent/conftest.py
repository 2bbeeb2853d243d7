"""The agent layer's tests: its async tests run on asyncio (the batch runner's loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _agent_helpers import Workspace, make_workspace


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """The agent tests' workspace in the test's folder, its note-writing tools registered (`make_workspace`)."""
    return make_workspace(tmp_path)
