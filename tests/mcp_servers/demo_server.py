"""A small MCP server written with the SDK's own server API (`MCPServer`), for the gateway tests.

Run: `python demo_server.py [--name N] [--http PORT | --sse PORT] [--extra TOOL]`. HTTP binds to
127.0.0.1 only. Tools cover what the gateway must handle: nested schemas, names that are not
legal for OpenAI, error results, mixed content, a crash mid-call, a slow call and a tool list
that changes at runtime.
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from pydantic import BaseModel


class Address(BaseModel):
    street: str
    city: str


class Blob(BaseModel):
    data: str


class Person(BaseModel):
    name: str
    address: Address
    tags: list[str] = []


async def announce_tools_changed(ctx: Context) -> None:
    """Tell clients of either era: a `notifications/tools/list_changed` for a handshake-era
    session (dropped by the SDK in the 2026-07-28 era), an event on the subscription bus for
    `subscriptions/listen` streams (the 2026-07-28 era's only way)."""
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()


def build(
    name: str, extra: list[str], annotated: bool = False, long_running: bool = False, offers: bool = False
) -> MCPServer:
    instructions = f"The {name} server: notes live under notes://, ask the summary prompt." if offers else None
    mcp = MCPServer(name, version="1.0", instructions=instructions)

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back, tagged with the server name."""
        return f"{name}:{text}"

    @mcp.tool()
    def describe(person: Person) -> str:
        """Describe a person (nested model parameter)."""
        return f"{person.name} lives in {person.address.city} ({','.join(person.tags)})"

    @mcp.tool(name="text.shout", description="Upper-case a string.")
    def shout(text: str) -> str:
        return text.upper() + "!"

    @mcp.tool(name="a_really_long_tool_name_that_goes_on_and_on_well_past_the_sixty_four_char_limit")
    def long_named() -> str:
        return "long ok"

    @mcp.tool()
    def fail(message: str) -> str:
        """Fail with a tool error (an isError result)."""
        raise ToolError(message)

    @mcp.tool()
    def crash() -> str:
        """Kill the server process in the middle of the call."""
        os._exit(3)

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return "done"

    @mcp.tool()
    def pid() -> int:
        """The server's process id (tells a reconnect apart)."""
        return os.getpid()

    @mcp.tool()
    def media() -> list[types.ContentBlock]:
        """Mixed content: text, an image, an embedded resource and a link."""
        return [
            types.TextContent(text="here you go"),
            types.ImageContent(data=base64.b64encode(b"\x89PNG0123456789").decode(), mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///notes.txt", text="hello notes", mime_type="text/plain")
            ),
            types.ResourceLink(uri="file:///big.bin", name="big.bin", mime_type="application/octet-stream", size=2048),
        ]

    @mcp.tool()
    async def enable_extra(tool: str, ctx: Context) -> str:
        """Register a new tool at runtime and announce tools/list_changed."""
        mcp.add_tool(lambda: f"{tool} ok", name=tool, description="added at runtime")
        await announce_tools_changed(ctx)
        return "ok"

    @mcp.tool()
    async def drop_tool(tool: str, ctx: Context) -> str:
        """Remove a tool at runtime and announce tools/list_changed."""
        mcp.remove_tool(tool)
        await announce_tools_changed(ctx)
        return "dropped"

    for tool in extra:
        mcp.add_tool(lambda tool=tool: f"{name}:{tool}", name=tool, description=f"extra tool {tool}")
    if annotated:  # tools that declare their side effects (MCP tool annotations)

        @mcp.tool(
            title="Look up",
            annotations=types.ToolAnnotations(
                title="Look up a key", read_only_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        )
        def lookup(key: str) -> str:
            """Read a value (declared read-only)."""
            return f"{name}:{key}"

        @mcp.tool(annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True))
        def wipe(key: str) -> str:
            """Delete a value (declared destructive)."""
            return f"{name}:wiped {key}"

    if long_running:  # tools that report progress, and one that waits to be cancelled

        @mcp.tool()
        async def steps(count: int, ctx: Context) -> str:
            """Report progress `count` times, then answer."""
            for i in range(1, count + 1):
                await ctx.report_progress(i, count, f"step {i} of {count}")
            return f"{count} steps"

        @mcp.tool()
        def blob(chars: int) -> Blob:
            """A typed result of `chars` characters (past a gateway's result budget, when large)."""
            return Blob(data="x" * chars)

        @mcp.tool()
        def freeze() -> str:
            """Stop this whole process (SIGSTOP): it answers nothing any more, not even a ping."""
            os.kill(os.getpid(), signal.SIGSTOP)
            return "thawed"

        @mcp.tool()
        async def until_cancelled(marker: str) -> str:
            """Write MARKER.started, wait up to 30 s; on a cancel write MARKER.cancelled."""
            open(marker + ".started", "w").close()
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                open(marker + ".cancelled", "w").close()
                raise
            return "not cancelled"

    if offers:  # prompts, resources and templates besides tools (issue 43)

        @mcp.prompt(title="Summarize a topic")
        def summary(topic: str, tone: str = "plain") -> list[Any]:
            """Ask for a summary of a topic's notes."""
            return [
                UserMessage(f"Summarize the notes on {topic}, in a {tone} tone."),
                UserMessage(
                    types.EmbeddedResource(
                        resource=types.TextResourceContents(
                            uri=f"notes://{topic}", text=f"notes on {topic}", mime_type="text/plain"
                        )
                    )
                ),
                AssistantMessage("Here is the summary:"),
            ]

        @mcp.prompt()
        def echo(text: str) -> str:
            """A prompt with a tool's name: prompts and tools are named apart."""
            return f"{name} says {text}"

        @mcp.resource("notes://index", name="Index", title="Notes index", mime_type="text/plain")
        def index() -> str:
            return f"{name}: alpha, beta"

        @mcp.resource("data://logo.png", name="Logo", mime_type="image/png")
        def logo() -> bytes:
            return b"\x89PNG0123456789"

        @mcp.resource("notes://{topic}", name="Note", mime_type="text/plain")
        def note(topic: str) -> str:
            return f"{name} notes on {topic}"

        @mcp.tool()
        def two_blocks() -> list[types.ContentBlock]:
            """Two text blocks, kept apart."""
            return [types.TextContent(text="first"), types.TextContent(text="second")]

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="demo")
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    parser.add_argument("--extra", action="append", default=[])
    parser.add_argument("--annotated", action="store_true", help="add tools that declare annotations")
    parser.add_argument("--long", action="store_true", help="add tools that report progress or wait for a cancel")
    parser.add_argument("--offers", action="store_true", help="add prompts, resources, templates and instructions")
    args = parser.parse_args()
    mcp = build(args.name, args.extra, args.annotated, args.long, args.offers)
    if args.http:
        mcp.run("streamable-http", host="127.0.0.1", port=args.http, streamable_http_path="/mcp")
    elif args.sse:
        mcp.run("sse", host="127.0.0.1", port=args.sse)
    else:
        print(f"demo server {args.name} starting", file=sys.stderr)
        mcp.run()


if __name__ == "__main__":
    main()
