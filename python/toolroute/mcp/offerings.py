"""What upstream servers offer besides tools, exposed for one request: prompts, resources,
resource templates and each server's instructions (issue 43).

They come from exactly the servers a request names (a user's own server of that id, else the
shared one; never another user's: the gateway resolves the ids), and pass as their servers sent
them. Only this changes, and docs/mcp.md lists it:

* a prompt name offered by several of the request's servers is qualified by its service
  (`{service}_{name}`, as tools are); a name only one of them offers is kept as it is;
* a resource URI (or template) offered by several servers is read from the first of them in the
  request's order (the others' copy is not listed);
* the instructions of several servers are joined, each under its service id; one server's pass
  as they are;
* strings a model or person reads have their controls made visible, as in tools' results.

Pure functions over listings: the gateway fetches, these decide.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from toolroute.textsafety import neutralize_json

M = TypeVar("M", bound=BaseModel)

# Routed by, or not text for a model: passed exactly as sent.
_OPAQUE = frozenset({"name", "uri", "uriTemplate", "_meta", "icons", "blob"})


def visible(item: M) -> M:
    """`item` as its server sent it, every other string's controls made visible (the same object
    when there are none, the common case)."""
    raw = item.model_dump(by_alias=True, exclude_none=True, mode="json")
    safe = _visible_json(raw)
    return item if safe == raw else type(item).model_validate(safe)


def _visible_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (v if k in _OPAQUE else _visible_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_visible_json(v) for v in value]
    return neutralize_json(value)


@dataclass(frozen=True)
class Offered:
    """One item exposed to the request, and where it comes from."""

    service_id: str
    own_name: str  # the server's name for it (a prompt's name, a resource's URI)
    item: Any


def prompt_names(listings: Sequence[tuple[str, Sequence[Any]]]) -> dict[str, Offered]:
    """Exposed prompt name -> where it comes from, for `(service_id, prompts)` in request order.
    A name several servers offer is qualified by each one's service id; a qualified name that
    is itself taken keeps the first holder (request order), and the later prompt is left out."""
    counts = Counter(p.name for _, prompts in listings for p in {p.name: p for p in prompts}.values())
    out: dict[str, Offered] = {}
    for service_id, prompts in listings:
        for prompt in prompts:
            name = prompt.name if counts[prompt.name] == 1 else f"{service_id}_{prompt.name}"
            out.setdefault(name, Offered(service_id, prompt.name, prompt))
    return out


def first_by_key(listings: Sequence[tuple[str, Sequence[Any]]], key: str) -> dict[str, Offered]:
    """Items by `key` (`uri`, `uri_template`), the first server in request order keeping each."""
    out: dict[str, Offered] = {}
    for service_id, items in listings:
        for item in items:
            own = getattr(item, key)
            out.setdefault(str(own), Offered(service_id, str(own), item))
    return out


def template_pattern(template: str) -> re.Pattern[str]:
    """A regex for the URIs an RFC 6570 template expands to: `{var}` one path segment, `{+var}`
    and `{#var}` anything, `{?a,b}` and `{&a}` an optional query, `{/var}` more segments."""
    parts: list[str] = []
    for literal, expression in re.findall(r"([^{]*)(\{[^}]*\})?", template):
        parts.append(re.escape(literal))
        if not expression:
            continue
        operator = expression[1:2]
        if operator in ("+", "#"):
            parts.append(".*")
        elif operator in ("?", "&"):
            parts.append(r"(?:[?&][^#]*)?")
        elif operator == "/":
            parts.append(r"(?:/[^?#]*)?")
        else:
            parts.append(r"[^/?#]*")
    return re.compile("".join(parts), re.DOTALL)


def resource_owner(uri: str, resources: dict[str, Offered], templates: dict[str, Offered]) -> str | None:
    """The service id to read `uri` from: the server that listed it, else the first whose template
    matches it; None when no server of the request offers it."""
    listed = resources.get(uri)
    if listed is not None:
        return listed.service_id
    for template, offered in templates.items():
        if template_pattern(template).fullmatch(uri):
            return offered.service_id
    return None


def joined_instructions(instructions: Sequence[tuple[str, str]]) -> str | None:
    """One server's instructions as they are; several, each under its service id."""
    given = [(service_id, text) for service_id, text in instructions if text]
    if not given:
        return None
    if len(given) == 1:
        text: str = neutralize_json(given[0][1])
        return text
    return "\n\n".join(f"[{service_id}]\n{neutralize_json(text)}" for service_id, text in given)
