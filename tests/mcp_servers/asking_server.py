"""An MCP server (the SDK's `MCPServer`) that asks its client things during calls, in either
protocol era: the SDK asks with a request of its own in the handshake era and with an
`input_required` result in the 2026-07-28 era (the same resolvers serve both).

Run: `python asking_server.py [--http PORT]` (HTTP binds to 127.0.0.1 only). Tools:
- `ask_name(tag)`: a form elicitation whose message carries `tag`; says what came back;
- `ask_twice(tag)`: two form elicitations, the second asked once the first is answered (its
  message names the first answer);
- `visit(tag)`: a URL elicitation mid-call (handshake era only: the SDK's `elicit_url`);
- `visit_later(tag)`: a URL elicitation the 2026-07-28 way (the tool's own `input_required`,
  2026-07-28 era only), then says what came back;
- `steps(tag)`: reports progress 1 of 3, asks the user's name (handshake era only), reports 2
  and 3, and says what came back;
- `open_url(tag)`: fails with -32042, a URL (carrying `tag`) the user must open first;
- `summarize(text)`: asks the client's model (sampling) and returns its text;
- `chatty(tag)`: logs two messages (`notifications/message`) during the call;
- `where(tag)`: asks the client's roots (`roots/list`) and returns their URIs.
"""

from __future__ import annotations

import argparse
from typing import Annotated

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.shared.exceptions import UrlElicitationRequiredError
from pydantic import BaseModel


class Name(BaseModel):
    name: str


class Colour(BaseModel):
    colour: str


def ask_for_name(tag: str) -> Elicit[Name]:
    return Elicit(f"What is your name? (asked for {tag})", Name)


def ask_for_colour(tag: str, name: Annotated[ElicitationResult[Name], Resolve(ask_for_name)]) -> Elicit[Colour]:
    who = name.data.name if name.action == "accept" else f"you who said {name.action}"
    return Elicit(f"Your favourite colour, {who}? (asked for {tag})", Colour)


def ask_for_summary(text: str) -> Sample:
    return Sample(
        [types.SamplingMessage(role="user", content=types.TextContent(text=f"Summarize: {text}"))], max_tokens=50
    )


def ask_for_roots() -> ListRoots:
    return ListRoots()


def build() -> MCPServer:
    server = MCPServer("asking")

    @server.tool()
    def ask_name(tag: str, answer: Annotated[ElicitationResult[Name], Resolve(ask_for_name)]) -> str:
        """Ask the user's name (a form), tagged."""
        if answer.action == "accept":
            return f"hello {answer.data.name} ({tag})"
        return f"{answer.action} ({tag})"

    @server.tool()
    def ask_twice(
        tag: str,
        name: Annotated[ElicitationResult[Name], Resolve(ask_for_name)],
        colour: Annotated[ElicitationResult[Colour], Resolve(ask_for_colour)],
    ) -> str:
        """Ask the user's name, then (knowing it) their favourite colour."""
        said = name.data.name if name.action == "accept" else name.action
        liked = colour.data.colour if colour.action == "accept" else colour.action
        return f"{said} likes {liked} ({tag})"

    @server.tool()
    async def visit(tag: str, ctx: Context) -> str:
        """Ask the user to open a URL (a URL elicitation during the call)."""
        answer = await ctx.elicit_url(f"Sign in for {tag}", f"https://auth.example/{tag}", f"visit-{tag}")
        return f"{answer.action} ({tag})"

    @server.tool()
    def visit_later(tag: str, ctx: Context) -> str | types.InputRequiredResult:
        """Ask the user to open a URL, by the call's result (the 2026-07-28 era's way)."""
        answer = (ctx.input_responses or {}).get("visit")
        if isinstance(answer, types.ElicitResult):
            return f"{answer.action} ({tag})"
        question = types.ElicitRequestURLParams(message=f"Sign in for {tag}", url=f"https://auth.example/{tag}")
        return types.InputRequiredResult(input_requests={"visit": types.ElicitRequest(params=question)})

    @server.tool()
    async def steps(tag: str, ctx: Context) -> str:
        """Progress before and after a question asked mid-call."""
        await ctx.report_progress(1, 3)
        answer = await ctx.elicit(f"What is your name? (asked for {tag})", Name)
        await ctx.report_progress(2, 3)
        await ctx.report_progress(3, 3)
        return f"{answer.data.name if answer.action == 'accept' else answer.action} stepped ({tag})"

    @server.tool()
    def open_url(tag: str) -> str:
        """Needs the user to open a URL first."""
        raise UrlElicitationRequiredError(
            [
                types.ElicitRequestURLParams(
                    message=f"Authorize {tag}", url=f"https://auth.example/{tag}", elicitation_id=f"auth-{tag}"
                )
            ]
        )

    @server.tool()
    def summarize(text: str, summary: Annotated[types.CreateMessageResult, Resolve(ask_for_summary)]) -> str:
        """Ask the client's model for a summary."""
        content = summary.content
        return f"summary: {content.text if isinstance(content, types.TextContent) else content}"

    @server.tool()
    async def chatty(tag: str, ctx: Context) -> str:
        """Log two messages during the call, then answer."""
        await ctx.log("info", f"first note for {tag}")
        await ctx.log("warning", {"note": "second", "tag": tag})
        return f"said it ({tag})"

    @server.tool()
    def where(tag: str, roots: Annotated[types.ListRootsResult, Resolve(ask_for_roots)]) -> str:
        """Ask the client's roots."""
        return f"roots of {tag}: " + ", ".join(str(root.uri) for root in roots.roots)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    server = build()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http, streamable_http_path="/mcp")
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
