"""The tool-search stage's shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _serve_helpers import make_router

from toolroute import ToolRouter


@pytest.fixture
def router(tmp_path: Path) -> Iterator[ToolRouter]:
    """Functions and demo upstream servers behind one router (`_serve_helpers.make_router`)."""
    with make_router(tmp_path) as r:
        yield r
