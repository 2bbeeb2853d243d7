"""A request's searchable catalogue: the Rust index over its tools, shared while the same tools
are asked for again.

An index holds exactly the tools it was built from (the very tool objects of one exposure), so a
search can never return another request's or another user's tools; requests naming the same
tools (the same allowlist, the same user's servers) share one index, found by identity in a
small cache that keeps the tools it indexed alive (an id is never reused while it is cached).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from toolroute._core import ToolSearchIndex
from toolroute.toolsearch.documents import document
from toolroute.types import Tool, ToolDefinition

CACHED_CATALOGUES = 64
MAX_LIMIT = 50  # results one search may return


class SearchCatalogue:
    """Tools and their index; `search` answers with tools, best first."""

    def __init__(self, tools: Sequence[Tool], namespaces: Mapping[str, str]) -> None:
        self.tools = tuple(tools)
        self.definitions: list[ToolDefinition] = [t.definition() for t in self.tools]
        self._index = ToolSearchIndex(
            [
                document(d["function"], namespaces.get(t.name, ""))
                for t, d in zip(self.tools, self.definitions, strict=True)
            ]
        )

    def search(self, query: str, limit: int = 5) -> list[int]:
        """Positions of the best tools for `query` (BM25F over names, namespaces, descriptions
        and parameters)."""
        return [n for n, _ in self._index.search(query, min(limit, MAX_LIMIT))]

    def search_regex(self, pattern: str, limit: int = 5) -> list[int]:
        """Positions of tools whose name, description or parameters match `pattern` (at most 200
        characters; `(?i)` for case-insensitive), in catalogue order."""
        return self._index.search_regex(pattern, min(limit, MAX_LIMIT))


class CatalogueCache:
    """Recently built catalogues, by the identity of the tools (and namespaces) they index."""

    def __init__(self, size: int = CACHED_CATALOGUES) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, ...], tuple[tuple[tuple[str, str], ...], SearchCatalogue]] = OrderedDict()

    def get(self, tools: Sequence[Tool], namespaces: Mapping[str, str]) -> SearchCatalogue:
        key = tuple(id(t) for t in tools)
        spaces = tuple(sorted(namespaces.items()))
        with self._lock:
            found = self._entries.get(key)
            if (
                found is not None
                and found[0] == spaces
                and all(a is b for a, b in zip(found[1].tools, tools, strict=True))
            ):
                self._entries.move_to_end(key)
                return found[1]
        catalogue = SearchCatalogue(tools, namespaces)  # built outside the lock: others go on
        with self._lock:
            self._entries[key] = (spaces, catalogue)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return catalogue
