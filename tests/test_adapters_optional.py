"""Each adapter imports its framework lazily and names the extra to install when it is missing."""

from __future__ import annotations

import importlib
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
def test_a_missing_framework_names_the_extra(adapter: str, framework: str, extra: str) -> None:
    # A fresh interpreter where the framework cannot be imported (None in sys.modules blocks it).
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"try:\n    import {adapter}\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"pip install '{extra}'" in out.stdout


def test_importing_toolroute_loads_no_framework() -> None:
    code = (
        "import sys, toolroute, toolroute.adapters, toolroute.cli\n"
        "frameworks = ('openai', 'anthropic', 'agents', 'langchain_core', 'mcp.server')\n"
        "print(sorted(m for m in frameworks if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("adapter", "framework", "extra"), ADAPTERS)
def test_each_adapter_imports_with_its_framework(adapter: str, framework: str, extra: str) -> None:
    assert importlib.import_module(adapter).__all__
