"""Building a router from command-line style options: workspace, limits, modules, MCP config.

Shared by `toolroute tools|call|serve` and by programs that embed the server.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolroute.builtins import builtin_tools
from toolroute.context import BuiltInToolContext, SandboxMode, SandboxNetwork, SandboxView, ToolLimits
from toolroute.errors import ToolArgumentError
from toolroute.router import ToolRouter

if TYPE_CHECKING:
    from toolroute.mcp import McpGateway


@dataclass(frozen=True)
class RouterOptions:
    """Everything needed to build a router the way the CLI does."""

    workspace: Path = field(default_factory=Path.cwd)
    read_only_roots: tuple[Path, ...] = ()
    modules: tuple[str, ...] = ()  # scanned for @function_tool / @mcp_service
    mcp_config: Path | None = None  # upstream MCP servers (toolroute.mcp.McpGateway.from_file)
    max_output_chars: int | None = None
    timeout: float | None = None  # default bash command timeout, seconds
    user_id: str | None = None
    # bash: confinement, network under it, extra writable folders, host variables passed
    sandbox: SandboxMode = "off"
    sandbox_network: SandboxNetwork = "none"
    sandbox_dns: str | None = None
    sandbox_writable: tuple[Path, ...] = ()
    sandbox_view: SandboxView = "host"
    env_allowlist: tuple[str, ...] | None = None  # None: bash's DEFAULT_ENV_ALLOWLIST
    # An upstream that cannot be reached at start: left out and retried in the background (a
    # server, which must start whatever one upstream does) rather than an error (`tools`, `call`).
    leave_out_failed_upstreams: bool = False
    # Only these servers of the config file are registered (and so started): a server exposes the
    # ones its `--mcp-servers` names, and has no use for the rest. None: every server.
    mcp_servers_only: tuple[str, ...] | None = None

    def limits(self) -> ToolLimits:
        changes: dict[str, Any] = {}
        if self.max_output_chars is not None:
            changes["max_output_chars"] = self.max_output_chars
        if self.timeout is not None:
            changes["command_timeout"] = self.timeout
            # Asking for a longer default than the cap is a request to raise the cap too.
            changes["max_command_timeout"] = max(self.timeout, ToolLimits().max_command_timeout)
        try:
            return dataclasses.replace(ToolLimits(), **changes)
        except ValueError as exc:
            raise ToolArgumentError(str(exc)) from None

    def context(self) -> BuiltInToolContext:
        try:
            return BuiltInToolContext(
                self.workspace,
                self.read_only_roots,
                limits=self.limits(),
                user_id=self.user_id,
                env_allowlist=self.env_allowlist,
                sandbox=self.sandbox,
                sandbox_network=self.sandbox_network,
                sandbox_dns=self.sandbox_dns,
                sandbox_writable=self.sandbox_writable,
                sandbox_view=self.sandbox_view,
            )
        except (OSError, ValueError) as exc:
            raise ToolArgumentError(f"bad workspace or read-only root: {exc}") from None


def split_list(value: str | None) -> list[str]:
    """`a,b, c` -> ['a', 'b', 'c']; None or blank -> []."""
    if not value:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def deferred_option(value: str | None) -> bool | list[str]:
    """`--defer`: `all` (every tool but the built-ins) or a comma-separated list."""
    return True if value == "all" else split_list(value)


def default_function_list() -> list[str]:
    """The built-in tools available in this installation, in the spec's order."""
    return list(builtin_tools())


def gateway_result_cap(max_output_chars: int | None) -> int:
    """The gateway's result cap for the command line's `--max-output-chars`: one number bounds
    what every tool returns, an upstream MCP result as much as a built-in's text."""
    from toolroute.mcp.results import DEFAULT_MAX_RESULT_CHARS  # imports the mcp SDK: only here

    return DEFAULT_MAX_RESULT_CHARS if max_output_chars is None else max_output_chars


def _load_gateway(
    config: Path, max_output_chars: int | None, leave_out_failed: bool = False, only: tuple[str, ...] | None = None
) -> McpGateway:
    if not config.is_file():
        raise ToolArgumentError(f"MCP config file not found: {config}")
    from toolroute.mcp import McpGateway  # the mcp SDK is imported only when a config is given

    # Eager: every upstream is listed before any name is shown, so a tool name two upstreams share
    # is qualified from the start instead of changing once the second server connects.
    return McpGateway.from_file(
        config,
        eager=True,
        max_result_chars=gateway_result_cap(max_output_chars),
        leave_out_failed=leave_out_failed,
        only=only,
    )


def _import_modules(router: ToolRouter, modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ToolArgumentError(f"cannot import module {name!r}: {exc}") from None
        except Exception as exc:  # a broken tool module is the caller's input, not a toolroute bug
            raise ToolArgumentError(f"cannot import module {name!r}: {type(exc).__name__}: {exc}") from exc
        router.scan(name)


def build_router(options: RouterOptions) -> ToolRouter:
    """A router with the options' context as default, the modules scanned, the gateway attached."""
    config = options.mcp_config
    gateway = None
    if config is not None:
        gateway = _load_gateway(
            config, options.max_output_chars, options.leave_out_failed_upstreams, options.mcp_servers_only
        )
    router = ToolRouter(context=options.context(), gateway=gateway)
    try:
        _import_modules(router, options.modules)
    except BaseException:
        router.close()
        raise
    return router
