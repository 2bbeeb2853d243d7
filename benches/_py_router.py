"""The obvious plain-Python router a user would otherwise write: dicts and `re`.

It implements the same rules as toolroute's Rust core (sanitise, prefix, cap with a hash;
five-level precedence with the user form), so the benchmarks compare like with like.
"""

from __future__ import annotations

import hashlib
import re

_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")
_UNDERSCORES = re.compile(r"_{2,}")
_EDGES = re.compile(r"^_+|_+$")
_USER_FORM = re.compile(r"^user_(.+)_tool_(.+)$")
_USER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def py_sanitize(raw: str) -> str:
    name = _EDGES.sub("", _UNDERSCORES.sub("_", _ILLEGAL.sub("_", raw)))
    if not name or not ("a" <= name[0].lower() <= "z"):
        name = ("tool_" + name).rstrip("_")
    if len(name) > 64:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
        name = name[:55].rstrip("_") + "_" + digest
    return name


def py_generate_api_function_name(service: str, tool: str) -> str:
    return py_sanitize(service + "_" + tool)


class PyRouter:
    def __init__(self) -> None:
        self.builtin: dict[str, object] = {}
        self.user: dict[str, tuple[str, object]] = {}
        self.local_mcp: dict[str, object] = {}
        self.function: dict[str, object] = {}
        self.global_mcp: dict[str, object] = {}

    def resolve(self, name: str, user_id: str | None = None) -> tuple[int, object] | None:
        if name in self.builtin:
            return (0, self.builtin[name])
        if _USER_FORM.match(name):
            entry = self.user.get(name)
            if entry is not None and (user_id is None or entry[0] == user_id):
                return (1, entry[1])
            return None
        if user_id is not None:
            if not _USER_ID.match(user_id):
                raise ValueError(user_id)
            entry = self.user.get(f"user_{user_id}_tool_{name}")
            if entry is not None and entry[0] == user_id:
                return (1, entry[1])
        for kind, table in ((2, self.local_mcp), (3, self.function), (4, self.global_mcp)):
            if name in table:
                return (kind, table[name])
        return None
