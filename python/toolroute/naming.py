"""Tool names: sanitisation (in Rust) and collision-aware allocation with a reverse map."""

from __future__ import annotations

from toolroute._core import (
    encode_user_tool,
    generate_api_function_name,
    generate_api_function_names,
    has_user_form,
    is_valid_tool_name,
    sanitize_tool_name,
    user_form_candidates,
    validate_user_id,
    with_hash_suffix,
)

USER_SERVICE_SEP = "_service_"


class NameAllocator:
    """Hands out exposed names so that two different raw keys never share one.

    The first key to claim a name keeps it; a later, different key that sanitises to the same
    name gets a deterministic hash-suffixed variant. `original(name)` maps back for routing.
    """

    def __init__(self) -> None:
        self._key_by_name: dict[str, str] = {}
        self._name_by_key: dict[str, str] = {}

    def allocate(self, key: str, candidate: str | None = None) -> str:
        if key in self._name_by_key:
            return self._name_by_key[key]
        name = candidate if candidate is not None else sanitize_tool_name(key)
        if self._key_by_name.get(name, key) != key:
            name = with_hash_suffix(name, key)
        if self._key_by_name.get(name, key) != key:  # a hash clash: astronomically unlikely
            raise ValueError(f"cannot allocate a unique tool name for {key!r}")
        self._key_by_name[name] = key
        self._name_by_key[key] = name
        return name

    def original(self, name: str) -> str | None:
        return self._key_by_name.get(name)

    def release(self, key: str) -> None:
        name = self._name_by_key.pop(key, None)
        if name is not None:
            self._key_by_name.pop(name, None)


def user_service_key(user_id: str, service_id: str) -> str:
    """`user_{userId}_service_{serviceId}`, the gateway key of a per-user server (spec 5.1)."""
    validate_user_id(user_id)
    return f"user_{user_id}{USER_SERVICE_SEP}{service_id}"


def parse_user_service_key(key: str) -> tuple[str, str] | None:
    """(user id, service id) of a `user_{userId}_service_{serviceId}` key, else None."""
    if not key.startswith("user_") or USER_SERVICE_SEP not in key[5:]:
        return None
    user_id, _, service_id = key[5:].partition(USER_SERVICE_SEP)
    return (user_id, service_id) if user_id and service_id else None


__all__ = [
    "NameAllocator",
    "encode_user_tool",
    "generate_api_function_name",
    "generate_api_function_names",
    "has_user_form",
    "is_valid_tool_name",
    "parse_user_service_key",
    "sanitize_tool_name",
    "user_form_candidates",
    "user_service_key",
    "validate_user_id",
    "with_hash_suffix",
]
