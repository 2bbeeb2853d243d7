"""Tool search over a request's catalogue: deferred tools stay out of the model's context until
a search finds them (docs/tool_search.md)."""

from toolroute.toolsearch.catalogue import CatalogueCache, SearchCatalogue
from toolroute.toolsearch.documents import document
from toolroute.toolsearch.tool import DEFAULT_NAME, SearchToolsRequest, is_search_tool, search_tool

__all__ = [
    "DEFAULT_NAME",
    "CatalogueCache",
    "SearchCatalogue",
    "SearchToolsRequest",
    "document",
    "is_search_tool",
    "search_tool",
]
