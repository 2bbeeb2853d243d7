"""Tool names: sanitisation and the per-user grammars (defined in Rust, `naming.rs`), and the
service-id rule (here).

* `user_{userId}_tool_{key}`: a user's MCP tool (one-to-one; see `encode_user_tool` and docs/mcp.md);
* `user_{userId}_service_{serviceId}`: AI4J's key of a user's own MCP server.
"""

from __future__ import annotations

import re

from toolroute._core import (
    USER_ID_RULE,
    decode_user_tool,
    encode_user_tool,
    generate_api_function_name,
    generate_api_function_names,
    has_user_form,
    is_valid_tool_name,
    sanitize_tool_name,
    user_service_candidates,
    user_service_key,
    user_tool_owners,
    validate_user_id,
    with_hash_suffix,
)
from toolroute.errors import ToolArgumentError

# The one rule for MCP service (server) ids, in configs and in the user registry alike: they
# become parts of tool names and registry keys, so a safe alphabet and a bound.
SERVICE_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SERVICE_ID_RULE = "a service id is 1 to 64 ASCII letters, digits, '_', '.' or '-' ([A-Za-z0-9_.-]{1,64})"


class UserId(str):
    """A user id that follows the one rule (`validate_user_id`, naming.rs), checked at the door
    it came in by: a served request's verified identity, a library call, the gateway's API.
    Making one is the check (`UserId(raw)` raises `ToolArgumentError` for a bad id); code handed
    one does not check it again (`UserId.of` returns it as it is). It is a `str`, equal to and
    hashing as the plain id."""

    __slots__ = ()

    def __new__(cls, value: object) -> UserId:
        validate_user_id(value)
        return super().__new__(cls, value)

    @classmethod
    def of(cls, value: object) -> UserId:
        """`value` checked, or as it is when it already was."""
        return value if type(value) is cls else cls(value)

    @classmethod
    def optional(cls, value: object) -> UserId | None:
        """`UserId.of`, with None (the shared, user-less view) passed through."""
        return None if value is None else cls.of(value)


def service_id_problem(service_id: object) -> str | None:
    """Why `service_id` is not a legal MCP service id (the message names the rule), else None."""
    if not isinstance(service_id, str):
        return f"MCP service id must be a string, not {type(service_id).__name__}; {SERVICE_ID_RULE}"
    if SERVICE_ID_RE.fullmatch(service_id) is None:
        return f"MCP service id {service_id[:80]!r} is not allowed; {SERVICE_ID_RULE}"
    return None


def parse_user_service_key(key: str, user_id: str | None = None) -> tuple[str, str] | None:
    """(user id, service id) of a `user_{userId}_service_{serviceId}` key, else None. A user id
    that itself contains `_service_` makes a bare key ambiguous: pass the caller's `user_id`."""
    splits = user_service_candidates(key, user_id)
    if len(splits) > 1:
        raise ToolArgumentError(
            f"MCP service key {key!r} splits into several (user, service) pairs; pass the user id to choose"
        )
    return splits[0] if splits else None


def mcp_tool_candidates(service_id: str, tool: str) -> list[str]:
    """The names an MCP tool may be exposed under, most readable first: its own name, then
    qualified by its service (the naming plan adds a hash of the identity if both are taken)."""
    plain = sanitize_tool_name(tool)
    qualified = generate_api_function_name(service_id, tool)
    return [plain] if qualified == plain else [plain, qualified]


__all__ = [
    "SERVICE_ID_RULE",
    "USER_ID_RULE",
    "UserId",
    "decode_user_tool",
    "encode_user_tool",
    "generate_api_function_name",
    "generate_api_function_names",
    "has_user_form",
    "is_valid_tool_name",
    "mcp_tool_candidates",
    "parse_user_service_key",
    "sanitize_tool_name",
    "service_id_problem",
    "user_service_candidates",
    "user_service_key",
    "user_tool_owners",
    "validate_user_id",
    "with_hash_suffix",
]
