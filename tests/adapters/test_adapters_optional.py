"""Each adapter imports its framework lazily and names the extra to install when it is missing."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

ADAPTERS = [
    ("toolroute.adapters.openai", "openai", "toolroute[openai]"),
    ("toolroute.adapters.anthropic", "anthropic", "toolroute[anthropic]"),
    ("toolroute.adapters.openai_agents", "agents", "toolroute[agents]"),
    ("toolroute.adapters.langchain", "langchain_core", "toolroute[langchain]"),
]


@pytest.mark.parametrize(("adapter", "framework", "extra"), ADAPTERS)
def test_a_missing_framework_names_the_extra(
    adapter: str, framework: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, framework, None)  # None in sys.modules makes the import fail
    monkeypatch.delitem(sys.modules, adapter, raising=False)  # re-run the adapter's import-time check
    with pytest.raises(ImportError, match=re.escape(f"pip install '{extra}'")):
        importlib.import_module(adapter)


def test_importing_toolroute_loads_no_framework() -> None:
    code = (
        "import sys, toolroute, toolroute.adapters, toolroute.cli\n"
        "frameworks = ('openai', 'anthropic', 'agents', 'langchain_core', 'mcp.server', 'PIL', 'pypdfium2')\n"
        "print(sorted(m for m in frameworks if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("adapter", "framework", "extra"), ADAPTERS)
def test_each_adapter_imports_with_its_framework(adapter: str, framework: str, extra: str) -> None:
    assert importlib.import_module(adapter).__all__
