"""The plain search tool (`search_tools`): for every model and framework without a provider's
own tool search, it finds deferred tools and shows their definitions, which makes them usable."""

from __future__ import annotations

import json
from functools import partial
from typing import Literal

from pydantic import Field

from toolroute.builtins.base import BuiltinRequest, BuiltinTool
from toolroute.context import BuiltInToolContext
from toolroute.errors import ToolArgumentError
from toolroute.toolsearch.catalogue import MAX_LIMIT, SearchCatalogue
from toolroute.types import ToolOutput

DEFAULT_NAME = "search_tools"


class SearchToolsRequest(BuiltinRequest):
    query: str = Field(description="what you need to do, in words; or a regular expression with mode=regex")
    mode: Literal["words", "regex"] = Field("words", description="words: ranked by relevance; regex: every match")
    limit: int = Field(5, ge=1, le=MAX_LIMIT, description="most tools to return")


def search_tool(catalogue: SearchCatalogue, name: str = DEFAULT_NAME) -> BuiltinTool[SearchToolsRequest]:
    """A search tool over `catalogue` (the request's deferred tools)."""
    return BuiltinTool(
        name=name,
        description=(
            f"Find tools among {len(catalogue.tools)} more that this conversation may use but whose "
            "definitions are not loaded. Returns each found tool's name, description and parameters; "
            "call a found tool by its name as usual."
        ),
        request_model=SearchToolsRequest,
        handler=partial(_search, catalogue),
        read_only=True,
    )


def _search(catalogue: SearchCatalogue, request: SearchToolsRequest, ctx: BuiltInToolContext) -> ToolOutput:
    if not request.query.strip():
        raise ToolArgumentError("search_tools needs a non-empty query")
    if request.mode == "regex":
        found = catalogue.search_regex(request.query, request.limit)
    else:
        found = catalogue.search(request.query, request.limit)
    tools = [catalogue.definitions[n]["function"] for n in found]
    if not tools:
        return ToolOutput(json.dumps({"tools": [], "note": "no tool matched; try other words"}), _trace(request, []))
    # Whole definitions or none: past the output cap the last ones go, and the text says so
    # (a cut through the middle of a schema would show the model a tool it cannot call).
    limit = ctx.limits.max_output_chars
    shown = len(tools)
    text = json.dumps({"tools": tools})
    while len(text) > limit and shown > 1:
        shown -= 1
        note = f"{len(tools) - shown} more matched but do not fit; ask with other words or a lower limit"
        text = json.dumps({"tools": tools[:shown], "note": note})
    return ToolOutput(text, _trace(request, [t["name"] for t in tools[:shown]]))


def _trace(request: SearchToolsRequest, found: list[str]) -> dict[str, object]:
    return {"query": request.query, "mode": request.mode, "found": found}


def is_search_tool(tool: object) -> bool:
    return isinstance(tool, BuiltinTool) and tool.request_model is SearchToolsRequest
