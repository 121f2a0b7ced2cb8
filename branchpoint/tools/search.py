"""The search tool the agent calls: named retrieval sources, top-k, call counting and latency.

`arun` is the agent's form: the search (faiss / BM25 / an HTTP retrieval server, and the
retrieval cache's SQLite in front of them) runs in a small thread pool of the run shared by every
search tool (`SEARCH_THREADS` at once), so the event loop goes on with other executions meanwhile and
the index libraries are not asked for hundreds of concurrent searches.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
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


#: Searches run at once by `SearchTool.arun` (per run, or per process outside a run).
SEARCH_THREADS = 8

#: The search threads of the run this task belongs to (set by the execution core, so a run's
#: threads end with it); None: the process's own.
RUN_SEARCH_POOL: contextvars.ContextVar[ThreadPoolExecutor | None] = contextvars.ContextVar(
    "branchpoint_search_pool", default=None
)

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def new_search_pool() -> ThreadPoolExecutor:
    """A pool of SEARCH_THREADS search threads (made when a search is handed to it)."""
    return ThreadPoolExecutor(SEARCH_THREADS, thread_name_prefix="branchpoint-search")


def search_pool() -> ThreadPoolExecutor:
    """The search threads of the current run, else the process's (made on first use)."""
    run_pool = RUN_SEARCH_POOL.get()
    if run_pool is not None:
        return run_pool
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = new_search_pool()
        return _POOL


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

    def _source(self, source: str | None) -> str:
        name = source or self.default_source
        if name not in self.sources:
            raise InputError(f"unknown retrieval source {name!r} (known: {', '.join(sorted(self.sources))})")
        return name

    def _search(self, query: str, name: str, k: int | None) -> tuple[list[RetrievedDoc], bool | None]:
        """The passages and whether the cache answered, read in the thread that searched (the
        cache keeps that flag per thread)."""
        docs = self.sources[name].search(query, k or self.top_k)
        return docs, getattr(self.sources[name], "last_cache_hit", None)

    def run(self, query: str, source: str | None = None, k: int | None = None) -> SearchResult:
        """Search `query` on `source` (default source if None) and return the top-k passages."""
        name = self._source(source)
        start = time.perf_counter()
        docs, hit = self._search(query, name, k)
        self.calls += 1
        return SearchResult(query, name, docs, time.perf_counter() - start, hit)

    async def arun(self, query: str, source: str | None = None, k: int | None = None) -> SearchResult:
        """`run` awaited on the running loop: the search itself in the search threads."""
        name = self._source(source)
        start = time.perf_counter()
        ctx = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        docs, hit = await loop.run_in_executor(search_pool(), ctx.run, self._search, query, name, k)
        self.calls += 1
        return SearchResult(query, name, docs, time.perf_counter() - start, hit)
