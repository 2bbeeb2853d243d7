"""What one agent asks the router for: a `ToolRequest`, built once and checked once.

Every door to the router's tools (`ExposedTools` and the framework adapters over it, served
mode, `ToolRouter.expose`) takes its options from this one value, so a new option is one field
here. `ToolRequest.of` is the convenience form the adapters keep (AI4J's positional
`functions, mcp_servers, user_id`, the rest by keyword): it builds the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import TypedDict, Unpack

from toolroute.errors import ToolArgumentError
from toolroute.naming import UserId, parse_user_service_key

# Which calls need a person's approval: none (False), every call of a tool that is not read-only
# (True), the tools named, or a rule over (name, arguments).
ApprovalRule = bool | Collection[str] | Callable[[str, Mapping[str, Any]], bool]


class RequestOptions(TypedDict, total=False):
    """The options of a `ToolRequest` as keywords (the convenience form); the same names and
    meanings as its fields (`tests/project/test_request_options.py` holds the two together)."""

    functions: Sequence[str]
    mcp_servers: Sequence[str]
    user_id: str | None
    user_servers: Sequence[str]
    deferred: bool | Collection[str]
    needs_approval: ApprovalRule


@dataclass(frozen=True, init=False)
class ToolRequest:
    """The tools one agent is shown, and how their calls are held.

    `functions` names local tools (built-ins, function tools, or code mode's tool);
    `mcp_servers` names local MCP services, upstream servers, or (AI4J's form)
    `user_{userId}_service_{id}`; `user_servers` names `user_id`'s own servers by plain id;
    `deferred` names tools or servers (True: every tool but the built-ins) whose definitions
    wait behind a search tool (docs/tool_search.md); `needs_approval` says which calls wait for
    a person. Sequences are kept as tuples; `user_id` is checked (`UserId`)."""

    functions: Sequence[str] = ()
    mcp_servers: Sequence[str] = ()
    user_id: str | None = None
    user_servers: Sequence[str] = ()
    deferred: bool | Collection[str] = ()
    needs_approval: ApprovalRule = False

    def __init__(
        self,
        functions: Sequence[str] = (),
        mcp_servers: Sequence[str] = (),
        user_id: str | None = None,
        user_servers: Sequence[str] = (),
        deferred: bool | Collection[str] = (),
        needs_approval: ApprovalRule = False,
    ) -> None:
        # The fields' own order and defaults (dataclasses.replace and `of` rely on it); written
        # out so each checked value is set once (frozen), the common forms without a detour: a
        # request is made per agent and per served user's door, so this stays about a microsecond.
        put = object.__setattr__
        put(self, "functions", () if functions == () else _names("functions", functions))
        put(self, "mcp_servers", () if mcp_servers == () else _names("mcp_servers", mcp_servers))
        put(self, "user_servers", () if user_servers == () else _names("user_servers", user_servers))
        if user_id is not None and type(user_id) is not UserId:
            user_id = UserId(user_id)
        put(self, "user_id", user_id)
        if deferred != () and type(deferred) is not bool:
            deferred = _names("deferred", deferred)
        put(self, "deferred", deferred)
        if type(needs_approval) is not bool and not callable(needs_approval):
            needs_approval = _names("needs_approval", needs_approval)
        put(self, "needs_approval", needs_approval)
        if user_servers and user_id is None:
            raise ToolArgumentError("user_servers needs the user_id they belong to")
        for sid in self.mcp_servers:
            if parse_user_service_key(sid, user_id) is None and parse_user_service_key(sid) is not None:
                raise ToolArgumentError(f"MCP service {sid!r} belongs to another user than {user_id!r}")

    @classmethod
    def of(
        cls,
        request: ToolRequest | Sequence[str] = (),
        *positional: Sequence[str] | str | None,
        **options: Unpack[RequestOptions],
    ) -> ToolRequest:
        """A request as given to an adapter: a `ToolRequest` itself, or the convenience form
        (functions, then optionally mcp_servers and user_id positionally; the rest by keyword)."""
        if isinstance(request, ToolRequest):
            if positional or options:
                raise TypeError("a ToolRequest carries every option: pass it alone, or the options alone")
            return request
        if len(positional) > 2:
            raise TypeError(f"at most functions, mcp_servers, user_id are positional; {len(positional) + 1} were given")
        if "functions" not in options:
            # The convenience form's order is the fields' own: Python refuses an option given
            # both positionally and by keyword.
            return cls(request, *positional, **options)  # type: ignore[arg-type, misc]
        if request:
            raise TypeError("functions given both positionally and by keyword")
        for name, value in zip(("mcp_servers", "user_id"), positional, strict=False):
            if name in options:
                raise TypeError(f"{name} given both positionally and by keyword")
            options[name] = value  # type: ignore[literal-required]
        return cls(**options)


def _names(option: str, value: object) -> tuple[str, ...]:
    """`value` as a tuple of names, or a TypeError that says what was wrong with it. A bare
    string is refused: iterated, it would name each of its characters."""
    kind = type(value)
    if kind is tuple or kind is list:  # the common forms, without the ABC checks below
        names: tuple[Any, ...] = value if kind is tuple else tuple(value)  # type: ignore[assignment, arg-type]
    elif isinstance(value, (str, bytes)):
        raise TypeError(f"{option} takes a list of names, not the single string {value!r}")
    elif isinstance(value, Iterable):
        names = tuple(value)
    else:
        raise TypeError(f"{option} takes a list of names, not {kind.__name__}")
    for name in names:
        if type(name) is not str and not isinstance(name, str):
            raise TypeError(f"{option} takes names (strings), not {type(name).__name__}: {name!r}")
    return names
