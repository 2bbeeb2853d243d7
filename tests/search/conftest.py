"""The search stage's shared fixtures: each module's `ws` is its own tree, searched by one router."""

from __future__ import annotations

from pathlib import Path

import pytest
from _search_helpers import router_for

from toolroute.router import ToolRouter


@pytest.fixture
def router(ws: Path) -> ToolRouter:
    """A router whose context is the module's `ws`."""
    return router_for(ws)
