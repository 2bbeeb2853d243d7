"""A tenant's own stdio MCP servers run in that tenant's sandbox, as that tenant's uid.

A server a user's registry entry names (`toolroute users servers add alice gh '{"command": ...}'`)
is the tenant's program: it does whatever its author, or whoever controls its input, makes it do.
Started by the gateway as configured, it ran as the server's user (root, often), unconfined: it
could list every workspace and read the registry's key. Here its configuration is rewritten before
the gateway sees it, so that the gateway (which never imports the built-in tools) starts the very
sandbox the tenant's `bash` commands run in: the minimal view, the tenant's workspace as its
working folder and `HOME`, its private `/tmp`, its uid, no network unless served mode allows it,
and no unix socket where the sandbox cannot hide the host's.

What differs from a command: a server lives for the connection, so it gets no parent-death
signal (the thread the gateway happens to spawn from may end first); the SDK's shutdown and the
host's watchdog (`deathwatch.py`) end it. (HTTP servers are the network's, not the host's:
`Tenancy` hands them on as configured.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolroute.builtins._process import command_environment
from toolroute.builtins._process.pump import WATCH
from toolroute.builtins._process.sandbox import sandbox_environment, server_argv
from toolroute.builtins.bash import sandbox_plan
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolError, ToolRegistrationError


def confined(config: Mapping[str, Any], context: BuiltInToolContext) -> dict[str, Any]:
    """`config` (a stdio `mcpServers` entry of the tenant whose built-ins' context is `context`)
    as it is started: its command inside the tenant's sandbox. Raises ToolRegistrationError
    when no sandbox works here (the server is then not started)."""
    # Always confined and always in the minimal view, whatever the context's bash is allowed:
    # the server runs beside the tenant's commands with the same reach, never more.
    mode = context.sandbox if context.sandbox in ("bubblewrap", "landlock") else "on"
    tenant = dataclasses.replace(context, sandbox=mode, sandbox_view="minimal")
    try:
        plan = sandbox_plan(tenant)
    except ToolError as exc:
        why = f"a tenant's stdio MCP server runs only in a sandbox, and none works here: {exc}"
        raise ToolRegistrationError(why) from None
    if plan is None:  # `on` never resolves to none; kept for the type checker
        raise ToolRegistrationError("a tenant's stdio MCP server runs only in a sandbox")
    cwd = _working_folder(config.get("cwd"), tenant)
    argv = server_argv([str(config["command"]), *(str(a) for a in config.get("args", ()))], plan, cwd)
    own = {str(k): str(v) for k, v in (config.get("env") or {}).items()}
    env = sandbox_environment(plan, {**command_environment(tenant.env_allowlist), **own})
    env.update(WATCH.marker())  # the host's watchdog ends it if the host dies
    return {**config, "command": argv[0], "args": argv[1:], "env": env, "cwd": str(cwd)}


def _working_folder(cwd: object, context: BuiltInToolContext) -> Path:
    """The workspace, or the configured `cwd` if it lies inside it (confined like any path)."""
    if cwd is None:
        return context.workspace
    try:
        folder = context.resolve(str(cwd), write=True)
    except ToolError as exc:
        raise ToolRegistrationError(f"a tenant's stdio MCP server's cwd must lie in its workspace: {exc}") from None
    if not folder.is_dir():
        raise ToolRegistrationError(f"a tenant's stdio MCP server's cwd {cwd!r} is not a folder in its workspace")
    return folder
