"""The search tool the agent calls: named retrieval sources, top-k, call counting and latency."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from branchpoint.errors import InputError
from branchpoint.retrieval.source import RetrievalSource
from branchpoint.traces import RetrievedDoc

#: The function-tool schema offered to chat models (OpenAI tool-call format).
SEARCH_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the encyclopedia for passages relevant to a query.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look up."}},
            "required": ["query"],
        },
    },
}


@dataclass
class SearchResult:
    """What one search call returned and what it cost."""

    query: str
    source: str
    docs: list[RetrievedDoc]
    latency_s: float
    cache_hit: bool | None = None


@dataclass
class SearchTool:
    """Runs queries on named sources; every call counts as one search, cached or not."""

    sources: Mapping[str, RetrievalSource]
    default_source: str
    top_k: int = 3
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.default_source not in self.sources:
            raise InputError(
                f"retrieval.default: unknown source {self.default_source!r} "
                f"(known: {', '.join(sorted(self.sources)) or 'none'})"
            )
        if self.top_k < 1:
            raise InputError(f"agent.top_k: must be at least 1, got {self.top_k}")

    def run(self, query: str, source: str | None = None, k: int | None = None) -> SearchResult:
        """Search `query` on `source` (default source if None) and return the top-k passages."""
        name = source or self.default_source
        if name not in self.sources:
            raise InputError(f"unknown retrieval source {name!r} (known: {', '.join(sorted(self.sources))})")
        start = time.perf_counter()
        docs = self.sources[name].search(query, k or self.top_k)
        self.calls += 1
        return SearchResult(
            query=query,
            source=name,
            docs=docs,
            latency_s=time.perf_counter() - start,
            cache_hit=getattr(self.sources[name], "last_cache_hit", None),
        )
