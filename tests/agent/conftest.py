"""The agent layer's tests: its async tests run on asyncio (the batch runner's loop)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
