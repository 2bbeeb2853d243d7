"""The `toolroute` command: list schemas, call one tool, serve tools over MCP, run the benchmarks.

Exit codes are distinct so scripts can branch on them (see `EXIT_*`). Every error is one line on
stderr, prefixed with `toolroute:`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib.metadata
import importlib.util
import ipaddress
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pydantic_core

from toolroute.builtins._process import hostsignals
from toolroute.builtins._process.environment import DEFAULT_ENV_ALLOWLIST, INHERIT_ALL
from toolroute.builtins.bash import describe_confinement
from toolroute.context import SANDBOX_MODES, SANDBOX_VIEWS, BuiltInToolContext, SandboxNetwork, network_policy
from toolroute.errors import (
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolPreconditionError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from toolroute.exposure import Exposure
from toolroute.formats import to_anthropic, to_responses
from toolroute.serve.admin import add_users_command
from toolroute.serve.options import (
    RouterOptions,
    build_router,
    default_function_list,
    deferred_option,
    split_list,
)
from toolroute.serve.served_mode import add_served_mode_options

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug in toolroute or a tool module: please report
EXIT_USAGE = 2  # bad command line, bad JSON, arguments that do not fit the schema, denied path
EXIT_NOT_FOUND = 3  # no tool (or MCP service) of that name
EXIT_TOOL_FAILED = 4  # the tool ran and failed
EXIT_TIMEOUT = 5  # the tool ran out of time
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # stdout closed early (`| head`): what a shell reports for SIGPIPE

BUILTINS_TOKEN = "@builtins"  # in --functions: every built-in tool

EPILOG = f"""exit codes: {EXIT_OK} ok, {EXIT_USAGE} bad usage or arguments, {EXIT_NOT_FOUND} tool not found,
{EXIT_TOOL_FAILED} tool failed, {EXIT_TIMEOUT} tool timed out, {EXIT_INTERNAL} internal error,
{EXIT_BROKEN_PIPE} output pipe closed early."""


class CliError(Exception):
    """An error to report as one line, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (plus a pointer to --help), exit code 2."""

    def error(self, message: str) -> NoReturn:
        _print_error(f"{message} (see '{self.prog} --help')")
        raise SystemExit(EXIT_USAGE)


def _print_error(message: str) -> None:
    one_line = " ".join(message.split())
    print(f"toolroute: error: {one_line}", file=sys.stderr)


def _exit_code(exc: ToolError) -> int:
    if isinstance(exc, ToolNotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, ToolTimeoutError):
        return EXIT_TIMEOUT
    if isinstance(exc, (ToolExecutionError, ToolPreconditionError)):
        return EXIT_TOOL_FAILED
    if isinstance(exc, (ToolArgumentError, ToolRegistrationError)):
        return EXIT_USAGE
    return EXIT_INTERNAL


# ---- shared options ----------------------------------------------------------------------


def _add_router_options(p: argparse.ArgumentParser, *, limits: bool) -> None:
    g = p.add_argument_group("router")
    g.add_argument("--workspace", metavar="DIR", help="workspace root of the built-in tools (default: cwd)")
    g.add_argument(
        "--read-only-root", metavar="DIR", action="append", default=[], help="extra readable root (repeatable)"
    )
    g.add_argument("--modules", metavar="MOD,...", help="modules to scan for @function_tool / @mcp_service")
    g.add_argument("--mcp-config", metavar="FILE", help="upstream MCP servers to route to (JSON config)")
    g.add_argument("--user-id", metavar="U", help="act for this user (per-user MCP tools, process ownership)")
    if limits:
        g.add_argument("--max-output-chars", metavar="N", type=int, help="cap on the text a tool returns")
        g.add_argument("--timeout", metavar="S", type=float, help="default command timeout in seconds (bash)")


def _add_sandbox_options(p: argparse.ArgumentParser, *, default: str) -> None:
    g = p.add_argument_group("bash commands")
    g.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        default=default,
        help=f"confinement of commands: auto = bubblewrap, else Landlock, else none; on = the same but "
        f"refuse to run unconfined; bubblewrap/landlock = exactly that (default: {default})",
    )
    g.add_argument(
        "--network",
        nargs="?",
        const="internet",
        default="none",
        choices=("none", "internet", "host"),
        help="the network of sandboxed commands: internet (the default when the flag is given) = a network "
        "namespace of each command's own whose user-mode NAT (pasta, Debian package passt) reaches public "
        "addresses only, never the host's loopback, private networks, link-local or cloud metadata addresses, "
        "nor the host's own addresses; host = the host's network namespace as it is (not for serve); "
        "default: none",
    )
    g.add_argument(
        "--network-allow",
        metavar="DOMAIN,...",
        action="append",
        default=[],
        help="instead of --network: only these domains (wildcards like *.pythonhosted.org), through a proxy "
        "(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY set for the command) that answers DNS too and refuses the rest "
        "with a message (and an audit line in serve)",
    )
    g.add_argument(
        "--network-dns",
        metavar="ADDRESS",
        help="the resolver that sandboxed commands' DNS (and the allowlist's proxy) asks (default: the host's)",
    )
    g.add_argument(
        "--view",
        choices=SANDBOX_VIEWS,
        default="host",
        help="what sandboxed commands can read: host = the whole host read-only; minimal = system folders, "
        "the workspace and declared roots only (served mode's tenants always get minimal)",
    )
    g.add_argument(
        "--writable", metavar="DIR", action="append", default=[], help="extra folder sandboxed commands may write"
    )
    g.add_argument(
        "--env",
        metavar="NAME,...",
        action="append",
        default=[],
        help="host variables (or patterns like AWS_*) passed to commands beside the default allowlist",
    )
    g.add_argument(
        "--env-inherit", action="store_true", help="pass the whole host environment to commands, secrets included"
    )


def _network(args: argparse.Namespace) -> SandboxNetwork:
    """--network and --network-allow as one `sandbox_network` value."""
    allowed = tuple(name for value in args.network_allow for name in split_list(value))
    if allowed and args.network != "none":
        raise CliError("--network-allow is a network of its own: give it without --network")
    try:
        return network_policy(allowed or str(args.network))
    except ValueError as exc:
        raise CliError(f"--network-allow: {exc}") from None


def _network_dns(value: str | None) -> str | None:
    if value is not None:
        try:
            loopback = ipaddress.ip_address(value).is_loopback
        except ValueError:
            raise CliError(f"--network-dns takes an IP address (the resolver asked), not {value!r}") from None
        if loopback:
            raise CliError(
                f"--network-dns {value}: a command's loopback is its namespace's own; leave the option out and "
                "the host's resolver (a loopback one too) is asked"
            )
    return value


def _env_allowlist(args: argparse.Namespace) -> tuple[str, ...] | None:
    if args.env_inherit:
        return (INHERIT_ALL,)
    extra = [name for value in args.env for name in split_list(value)]
    return (*DEFAULT_ENV_ALLOWLIST, *extra) if extra else None


def _add_allowlist_options(p: argparse.ArgumentParser, functions_help: str) -> None:
    g = p.add_argument_group("allowlist")
    g.add_argument("--functions", metavar="A,B", help=functions_help)
    g.add_argument(
        "--mcp-servers",
        metavar="X,Y",
        help="ids of MCP services whose tools to include: local @mcp_service names or server ids from "
        "--mcp-config (the config file itself goes to --mcp-config)",
    )
    g.add_argument(
        "--defer",
        metavar="A,X|all",
        help="tools, local services or MCP servers of the allowlist to leave unlisted: a search_tools tool "
        "finds them, and they stay callable ('all': every tool but the built-ins; docs/tool_search.md)",
    )


def _mcp_server_ids(args: argparse.Namespace) -> list[str]:
    """The ids in --mcp-servers; a config file given there instead of to --mcp-config is named as such."""
    ids = split_list(args.mcp_servers)
    for value in ids:
        if value.endswith((".json", ".jsonc")) or os.sep in value:
            raise CliError(
                f"--mcp-servers takes server ids, not a file ({value!r}): pass the file as --mcp-config {value} "
                "and name the servers to expose with --mcp-servers ID,..."
            )
    return ids


def _options(args: argparse.Namespace) -> RouterOptions:
    workspace = Path(args.workspace).expanduser().resolve() if args.workspace else Path.cwd()
    if not workspace.is_dir():
        raise CliError(f"workspace is not a directory: {workspace}")
    return RouterOptions(
        workspace=workspace,
        read_only_roots=tuple(Path(p).expanduser().resolve() for p in args.read_only_root),
        modules=tuple(split_list(args.modules)),
        mcp_config=Path(args.mcp_config).expanduser() if args.mcp_config else None,
        max_output_chars=getattr(args, "max_output_chars", None),
        timeout=getattr(args, "timeout", None),
        user_id=args.user_id,
        sandbox=args.sandbox,
        sandbox_network=_network(args),
        sandbox_dns=_network_dns(args.network_dns),
        sandbox_writable=tuple(Path(p).expanduser().resolve() for p in args.writable),
        sandbox_view=args.view,
        env_allowlist=_env_allowlist(args),
    )


def _function_list(value: str | None, *, default: Callable[[], list[str]]) -> list[str]:
    if value is None:
        return default()
    names: list[str] = []
    for name in split_list(value):
        names.extend(default_function_list() if name == BUILTINS_TOKEN else [name])
    return names


# ---- tools -------------------------------------------------------------------------------


def _parameters_summary(parameters: dict[str, Any]) -> str:
    required = set(parameters.get("required", ()))
    return ", ".join(f"{p}*" if p in required else p for p in parameters.get("properties", {})) or "-"


def _table(exposure: Exposure) -> str:
    rows = [("NAME", "KIND", "RO", "PARAMETERS (* required)", "DESCRIPTION")]
    for tool in exposure.definitions:
        fn = tool["function"]
        description = (fn.get("description") or "").strip().splitlines()
        listed = exposure.tools[fn["name"]]  # the very tool: request-bound ones (run_code) too
        rows.append(
            (
                fn["name"],
                listed.kind.key,
                "yes" if listed.traits.read_only else "no",
                _parameters_summary(fn["parameters"]),
                description[0][:80] if description else "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def cmd_tools(args: argparse.Namespace) -> int:
    functions = _function_list(args.functions, default=lambda: [] if args.mcp_servers else default_function_list())
    options = _options(args)
    with build_router(options) as router:
        exposure = router.expose(functions, _mcp_server_ids(args), args.user_id, deferred=deferred_option(args.defer))
        tools = exposure.definitions
        note = _confinement_note(options.context()) if any(t["function"]["name"] == "bash" for t in tools) else None
        if args.format == "table":
            print(_table(exposure))
            if note:
                print(f"\n{note}")
            return EXIT_OK
        if note:
            print(f"toolroute: {note}", file=sys.stderr)
        shaped: list[Any] = tools
        if args.format == "responses":
            shaped = to_responses(tools)
        elif args.format == "anthropic":
            shaped = to_anthropic(tools)
        print(json.dumps(shaped, indent=2, ensure_ascii=False))
    return EXIT_OK


def _confinement_note(ctx: BuiltInToolContext) -> str:
    """One line saying what bash commands run under with these options."""
    info = describe_confinement(ctx)
    kind = info["confinement"]
    if kind == "unavailable":
        return f"bash: sandbox={info['mode']} cannot be honoured here, commands would be refused: {info['reason']}"
    if kind == "none":
        return f"bash: commands run unconfined (sandbox={info['mode']})"
    network = f"network: {info['network']}" if info["network"] else "no network"
    if info.get("networkAllow"):
        network += f" ({', '.join(info['networkAllow'])})"  # type: ignore[arg-type]
    extra = f"; not confined: {info['notConfined']}" if "notConfined" in info else ""
    return f"bash: commands run under {kind} (sandbox={info['mode']}, view={info['view']}, {network}{extra})"


# ---- call --------------------------------------------------------------------------------


def _read_arguments(raw: str) -> str:
    return sys.stdin.read() if raw == "-" else raw


def _timed_out(trace: Any) -> bool:
    """A tool that returns normally after its time ran out says so in its trace (bash: `timedOut`)."""
    return isinstance(trace, Mapping) and trace.get("timedOut") is True


def cmd_call(args: argparse.Namespace) -> int:
    with hostsignals.chained(), build_router(_options(args)) as router:
        output = router.execute(args.name, _read_arguments(args.arguments), args.user_id)
    if args.trace:
        print(pydantic_core.to_json({"text": output.text, "trace": output.trace}, fallback=repr).decode())
    else:
        print(output.text)
    if _timed_out(output.trace):
        _print_error(f"{args.name} ran out of time (its result is printed above)")
        return EXIT_TIMEOUT
    return EXIT_OK


# ---- serve -------------------------------------------------------------------------------


def _is_interrupt(exc: BaseException) -> bool:
    """A KeyboardInterrupt, possibly wrapped in (nested) exception groups by task groups."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    inner: Sequence[BaseException] = getattr(exc, "exceptions", None) or ()
    return bool(inner) and all(_is_interrupt(e) for e in inner)


@contextlib.contextmanager
def _until_interrupted() -> Iterator[None]:
    """Run a server until Ctrl-C / SIGTERM, which are a normal way to stop it."""
    try:
        yield
    except BaseException as exc:
        if not _is_interrupt(exc):
            raise


def _require_served_network(options: RouterOptions) -> None:
    """A single-user server's network: checked at start, as a multi-tenant one's is (isolation.py)."""
    from toolroute.builtins._process.sandbox import SandboxUnavailable, resolve_kind
    from toolroute.serve.isolation import require_network

    try:
        kind = resolve_kind(options.sandbox)
        require_network(options.context(), kind, None)
    except (SandboxUnavailable, ToolArgumentError) as exc:
        raise CliError(str(exc)) from None


def cmd_serve(args: argparse.Namespace) -> int:
    if args.functions is None and args.mcp_servers is None:
        raise CliError(
            f"serve needs an explicit allowlist: --functions NAME,... (or {BUILTINS_TOKEN}) and/or --mcp-servers ID,..."
        )
    functions = _function_list(args.functions, default=list)
    server_ids = _mcp_server_ids(args)
    from toolroute.serve.served_mode import auth_requested

    inherited = None
    if args.transport == "http":
        from toolroute.serve.recycle import inherited_socket

        try:
            inherited = inherited_socket()
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot take the socket handed over: {exc}") from None
        if inherited is not None:  # what it is bound to decides, not --host
            args.host = inherited.getsockname()[0]
    if args.transport == "http" and not auth_requested(args):
        from toolroute.serve.server import is_loopback

        if not is_loopback(args.host):
            raise CliError(
                f"refusing to serve on {args.host} without authentication: without --auth-jwks, "
                "--auth-public-key or --api-keys, HTTP serving binds loopback addresses only"
            )
    # A server starts whatever one upstream does: one that cannot be reached is left out and
    # retried in the background (docs/mcp.md).
    # Only the servers named are started: the config file may list many more.
    options = dataclasses.replace(_options(args), leave_out_failed_upstreams=True, mcp_servers_only=tuple(server_ids))
    # (With authentication, the tenants' network is checked with their sandbox: isolation.py.)
    if options.sandbox_network == "host" or (not auth_requested(args) and options.sandbox_network != "none"):
        _require_served_network(options)
    if options.sandbox == "auto" and describe_confinement(options.context())["confinement"] == "none":
        print(
            "toolroute: warning: no sandbox works here (see 'toolroute tools --sandbox on'); bash commands "
            "run unconfined",
            file=sys.stderr,
        )
    from toolroute.serve.shutdown import Shutdown

    policy = None
    if getattr(args, "policy", None):
        from toolroute.serve.policy_watch import PolicyWatch

        try:
            policy = PolicyWatch(args.policy)  # a broken file refuses to start, naming line and column
        except ToolArgumentError as exc:
            raise CliError(str(exc)) from None
    shutdown = Shutdown()
    with build_router(options) as router:
        # The MCP server stack loads only here.
        from toolroute.serve.doors import ServedTools
        from toolroute.serve.server import bind_socket, http_url, serve_http, serve_stdio

        if policy is not None and args.transport == "stdio":
            # One caller, known at start: the policy's view of it is made now (the file is read
            # once; served HTTP reads it again when it changes).
            from toolroute.policy import Subject, policy_subject

            router.policy = policy.policy
            with policy_subject(Subject(args.user_id, {}, "stdio")):
                served = ServedTools(router, functions, server_ids, args.user_id, deferred=deferred_option(args.defer))
        else:
            served = ServedTools(router, functions, server_ids, args.user_id, deferred=deferred_option(args.defer))
        if not served.names:
            raise CliError("the allowlist is empty: nothing to serve")

        def ready(url: str) -> None:
            # Now that uvicorn has put its handlers in place, SIGTERM/SIGHUP end commands first.
            hostsignals.install()
            print(f"toolroute: serving {len(served.names)} tool(s) on {url}", file=sys.stderr, flush=True)
            if not auth_requested(args):
                print("toolroute: no authentication configured: loopback only", file=sys.stderr, flush=True)

        if args.transport == "stdio":
            # SIGTERM ends the server like Ctrl-C, so the router still closes (background
            # processes, upstream sessions), within the shutdown's bound (serve/shutdown.py).
            def interrupt(signum: int, frame: object) -> NoReturn:
                shutdown.asked()  # a second signal forces, and never returns
                raise KeyboardInterrupt

            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, interrupt)
            with _until_interrupted(), hostsignals.chained():
                print(f"toolroute: serving {len(served.names)} tool(s) on stdio", file=sys.stderr, flush=True)
                anyio.run(serve_stdio, served)
            router.close()  # (idempotent) before a signalled stop's exit, which skips the rest
            if shutdown.started:
                shutdown.exit_now()
            return EXIT_OK
        try:
            sock = inherited or bind_socket(args.host, args.port)
        except OSError as exc:
            raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
        from toolroute.serve.served_mode import build_served_mode

        mode = build_served_mode(
            args,
            router,
            functions,
            server_ids,
            http_url(sock, args.path),
            base_context=options.context(),
            policy=policy,
        )
        try:
            with _until_interrupted():
                serving = functools.partial(
                    serve_http,
                    sock=sock,
                    auth=mode.auth,
                    recycle=mode.recycle,
                    connections=mode.connections,
                    shutdown=shutdown,
                    routes=mode.routes,
                )
                anyio.run(serving, mode.doors, args.host, args.port, args.path, ready)
        finally:
            mode.close()
    if shutdown.started:
        shutdown.exit_now()  # a stop signal: everything is closed, and the bound's clock runs
    if mode.recycle is not None and mode.recycle.requested:
        # Everything is closed (the router's upstream sessions and processes too); the socket
        # still listens, and the fresh process takes it over. The commands' watchdog is let go
        # and reaped here: the exec would close its pipe all the same, and leave it a zombie.
        from toolroute.builtins._process.pump import WATCH

        WATCH.close()
        mode.recycle.exec_fresh()
    return EXIT_OK


# ---- bench -------------------------------------------------------------------------------


BENCH_NEEDS = ("pytest", "pytest_benchmark")  # what benches/report.py runs the bench files with


def cmd_bench(args: argparse.Namespace) -> int:
    missing = [name for name in BENCH_NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(f"bench needs {' and '.join(missing)}: pip install 'toolroute[bench]'")
    benches = Path(args.benches).expanduser().resolve()
    report = benches / "report.py"
    if not report.is_file():
        raise CliError(f"no benchmark report script at {report} (run from a toolroute checkout or pass --benches)")
    command = [sys.executable, str(report), "--benches", str(benches), "--out", str(args.out)]
    if args.k:
        command += ["-k", args.k]
    if args.no_plot:
        command.append("--no-plot")
    return subprocess.call(command)


def cmd_index(args: argparse.Namespace) -> int:
    """`index stop`: end this environment's search index daemon (docs/search.md)."""
    from toolroute._core import search_daemon_stop

    stopped = search_daemon_stop()
    print("stopped the search index daemon" if stopped else "no search index daemon answered")
    return EXIT_OK if stopped else EXIT_NOT_FOUND


# ---- parser ------------------------------------------------------------------------------


def _installed_version() -> str:
    """The version pip installed (the package metadata), not a literal that could drift from it."""
    try:
        return importlib.metadata.version("toolroute")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolroute",
        description="The unified tool router between an LLM agent and the tools it may call.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    tools = sub.add_parser(
        "tools",
        help="print the schemas of an allowlist of tools",
        description="Print the tool definitions a request with this allowlist would expose to the model. "
        "Default allowlist: the built-in tools.",
        epilog=EPILOG,
    )
    _add_allowlist_options(tools, "tools to include, by exposed name (default: every built-in tool)")
    tools.add_argument(
        "--format",
        choices=("json", "table", "responses", "anthropic"),
        default="json",
        help="json: OpenAI Chat Completions definitions (default); table: readable summary; "
        "responses: OpenAI Responses API; anthropic: Anthropic Messages API",
    )
    _add_router_options(tools, limits=False)
    _add_sandbox_options(tools, default="off")
    tools.set_defaults(handler=cmd_tools)

    call = sub.add_parser(
        "call",
        help="invoke one tool and print its result",
        description="Route one call exactly as an agent's tool call would be routed, and print the result "
        "string on stdout.",
        epilog=EPILOG,
    )
    call.add_argument("name", metavar="NAME", help="exposed tool name (built-in, function, MCP, user_{id}_tool_{t})")
    call.add_argument("arguments", metavar="JSON", nargs="?", default="{}", help="arguments object; '-' reads stdin")
    call.add_argument("--trace", action="store_true", help='print {"text": ..., "trace": ...} as JSON instead')
    _add_router_options(call, limits=True)
    _add_sandbox_options(call, default="off")
    call.set_defaults(handler=cmd_call)

    serve = sub.add_parser(
        "serve",
        help="serve an allowlist of tools as an MCP server",
        description="Expose exactly the allowlisted tools to MCP clients over stdio or streamable HTTP. "
        "A call to any other name is refused, whatever the router could otherwise reach.",
        epilog=EPILOG,
    )
    _add_allowlist_options(
        serve, f"tools to serve ({BUILTINS_TOKEN} = every built-in tool); this, --mcp-servers or both is required"
    )
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="HTTP port, 0 picks a free one (default: 8000)")
    serve.add_argument("--path", default="/mcp", help="HTTP endpoint path (default: /mcp)")
    _add_router_options(serve, limits=True)
    _add_sandbox_options(serve, default="auto")
    add_served_mode_options(serve)
    serve.set_defaults(handler=cmd_serve)

    add_users_command(sub)

    index = sub.add_parser(
        "index",
        help="manage the search index daemon",
        description="grep and glob ask one long-lived daemon per user and environment, which holds "
        "the warm indexes: by default when one runs (a process starts one after a first answer of "
        "50 ms or more), with TOOLROUTE_SEARCH_INDEX_DAEMON=1 always (and a query that finds none "
        "starts one), with 0 never. 'stop' ends the daemon of this environment (exit 3 when none "
        "answered).",
    )
    index.add_argument("action", choices=("stop",), help="stop: end the daemon")
    index.set_defaults(handler=cmd_index)

    bench = sub.add_parser(
        "bench",
        help="run the benchmark suite and print the comparison table",
        description="Run every benches/bench_*.py in one pytest process, print per-group ratios "
        "(alternative time / toolroute time) and write JSON and a PNG chart.",
    )
    bench.add_argument("--benches", default="benches", help="benchmark directory (default: ./benches)")
    bench.add_argument("--out", default="bench-report", help="output directory (default: ./bench-report)")
    bench.add_argument("-k", metavar="EXPR", help="only benchmarks matching this pytest -k expression")
    bench.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    bench.set_defaults(handler=cmd_bench)
    return parser


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Served over HTTP (many users, crowds that come and go), from the process's own command line
    # (never a caller's process): on PYTHONMALLOC=malloc, before any thread starts (issue 62).
    if argv is None and args.handler is cmd_serve and args.transport == "http":
        from toolroute.serve.allocator import reexec_on_served_allocator

        reexec_on_served_allocator()
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader has all it wanted (`toolroute tools | head`): stop quietly, like `cat` would.
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except CliError as exc:
        _print_error(str(exc))
        return exc.code
    except ToolError as exc:
        _print_error(str(exc))
        return _exit_code(exc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        _print_error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
