"""Tools the agent calls."""

from branchpoint.tools.search import SEARCH_TOOL_SCHEMA, SearchResult, SearchTool

__all__ = ["SEARCH_TOOL_SCHEMA", "SearchResult", "SearchTool"]
