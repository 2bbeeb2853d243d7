"""README's code blocks run as written: each Python block runs (in a scratch project with the
files it names) or, where it needs a model provider's network client or serves forever, compiles
and names only what toolroute has; each `toolroute ...` command line of the shell blocks runs
and exits 0, except those that serve or need an outside service (listed)."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _serve_helpers import tool_env, toolroute_exe

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)

# Python blocks by their first line: run (with `router` already made where the block uses one
# made earlier), or only checked (provider clients over the network, a server that runs forever).
RUN = ("from pydantic import BaseModel", "from toolroute.agent import", "# servers.json:", "# code mode:")
CHECK = (
    "from toolroute.serve import",
    "from openai import",
    "from anthropic import",
    "from agents import",
    "from agents.run_config import",
    "from toolroute.adapters.langchain import",
)
PRELUDE = "from toolroute import BuiltInToolContext, ToolRouter\nrouter = ToolRouter(context=BuiltInToolContext('.'))\n"
# Command lines not run: they serve until stopped, need a service outside the test, or take long.
SKIP_COMMAND = re.compile(r"toolroute (serve|users|bench)\b|--mcp-servers github")

MY_TOOLS = """
from toolroute import function_tool

@function_tool(name="echo", description="Echo the text.")
def echo(text: str = "hi") -> str:
    return text
"""


def _blocks(lang: str) -> list[str]:
    return [body for kind, body in BLOCK.findall(README.read_text()) if kind == lang]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "my_tools").mkdir()
    (tmp_path / "my_tools" / "__init__.py").write_text(MY_TOOLS)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hello')  # TODO: more\n")
    (tmp_path / "README.md").write_text(README.read_text())
    (tmp_path / "servers.json").write_text(
        '{"mcpServers": {"clock": {"command": "python", "args": ["-m", "mcp_server_time"]}}}'
    )
    return tmp_path


def _env(project: Path) -> dict[str, str]:
    env = tool_env()
    env["PYTHONPATH"] = f"{project}:{env.get('PYTHONPATH', '')}"
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # `python` is this one
    return env


def test_every_python_block_is_run_or_checked() -> None:
    for body in _blocks("python"):
        assert body.startswith(RUN + CHECK), f"classify this README block in test_readme.py:\n{body[:200]}"


@pytest.mark.parametrize("start", RUN)
def test_python_blocks_run_as_written(project: Path, start: str) -> None:
    (body,) = [b for b in _blocks("python") if b.startswith(start)]
    source = body if "router = " in body or start == "# servers.json:" else PRELUDE + body
    done = subprocess.run(
        [sys.executable, "-c", source], cwd=project, env=_env(project), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("start", CHECK)
def test_other_python_blocks_compile_and_name_only_what_exists(start: str) -> None:
    (body,) = [b for b in _blocks("python") if b.startswith(start)]
    tree = ast.parse(body if "await " not in body else f"async def _():\n{_indent(body)}")
    imported: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolroute"):
            module = __import__(node.module, fromlist=[a.name for a in node.names])
            for alias in node.names:
                imported[alias.asname or alias.name] = getattr(module, alias.name)  # raises if missing
    # `tools.method(...)` on an adapter made in the block: the method exists on its class.
    made = {
        target.id: node.value.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and made.get(node.value.id) in imported:
            assert hasattr(imported[made[node.value.id]], node.attr), (start, node.attr)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id in imported:
                assert hasattr(imported[func.id], node.attr), (start, node.attr)


def _indent(body: str) -> str:
    return "".join(f"    {line}\n" for line in body.splitlines())


def _commands() -> list[str]:
    lines = []
    for body in _blocks("sh"):
        for line in body.replace("\\\n", " ").splitlines():
            for part in line.split("#", 1)[0].split("&&"):
                part = part.strip()
                if part.startswith("toolroute ") or (part.startswith("echo ") and "| toolroute" in part):
                    lines.append(part)
    return lines


def test_the_shell_blocks_have_commands_to_run() -> None:
    assert len([c for c in _commands() if not SKIP_COMMAND.search(c)]) >= 6


@pytest.mark.parametrize("command", [c for c in _commands() if not SKIP_COMMAND.search(c)])
def test_shell_commands_run_as_written(project: Path, command: str) -> None:
    exe = toolroute_exe()
    if "|" in command:
        left, right = command.split("|", 1)
        stdin = shlex.split(left)[1] + "\n"
        argv = shlex.split(right)
    else:
        stdin, argv = None, shlex.split(command)
    done = subprocess.run(
        [exe, *argv[1:]], cwd=project, env=_env(project), input=stdin, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (command, done.stderr[-2000:])
