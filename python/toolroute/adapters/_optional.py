"""Optional dependencies of the adapters: imported on first use, with the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str, package: str | None = None) -> ModuleType:
    """Import `module` or fail with the pip command that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this toolroute adapter needs the {package or module!r} package: pip install 'toolroute[{extra}]'"
        ) from exc
