"""The retrieval sources of a run, each opened once (`SourcePool`) and searched through the run's
persistent retrieval cache."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.experiments.spec import ExperimentSpec, SourceSpec
from branchpoint.retrieval import RetrievalSource
from branchpoint.retrieval.cache import CachedSource, RetrievalCache, source_params
from branchpoint.retrieval.interventions import InterventionSource, OracleRefused, SearchContext, context_of
from branchpoint.retrieval.sources.interventions import InterventionSourceSpec
from branchpoint.tools import SearchTool


def _source_key(name: str, source: SourceSpec) -> str:
    """A source's identity within a run: its name and its whole spec."""
    return json.dumps([name, source.model_dump()], sort_keys=True)


class SourcePool:
    """Opens each retrieval source once per run (indexes are cached on disk by corpus hash).

    With `cache_path`, every source goes through the run's persistent retrieval cache, so
    repeated executions (forks, reruns) get exactly the same evidence for the same query. The
    cache file is opened on first use: `prepare` opens (and so validates) a spec's sources
    without writing anything into the run folder.
    """

    def __init__(self, progress: bool, cache_path: Path | None = None) -> None:
        self._raw: dict[str, RetrievalSource] = {}
        self._open: dict[str, RetrievalSource] = {}
        self._progress = progress
        self._lock = threading.Lock()
        self._cache_path = cache_path
        self._cache: RetrievalCache | None = None

    def _opened(self, key: str, name: str, source: SourceSpec) -> RetrievalSource:
        """The source itself (no cache), opened (and if needed built) the first time; lock held."""
        if key not in self._raw:
            self._raw[key] = source.open(name, progress=self._progress)
        return self._raw[key]

    def prepare(self, spec: ExperimentSpec) -> None:
        """Open every source a condition searches (a corpus that does not parse, a stale index:
        InputError now, before the run folder is written)."""
        if spec.agent.search:
            for name, source in spec.retrieval.sources.items():
                if isinstance(source, InterventionSourceSpec):
                    self._intervention(name, source, spec.retrieval.sources, cached=False)
                    continue
                with self._lock:
                    self._opened(_source_key(name, source), name, source)

    def check_oracles(self, spec: ExperimentSpec, questions: Iterable[Any]) -> None:
        """Every planned question an `oracle` source will be asked about has gold passages: one
        InputError naming the questions without, before the run folder is written (not at the
        first search, after other executions were recorded)."""
        if not spec.agent.search:
            return
        questions = list(questions)
        for name, source in spec.retrieval.sources.items():
            if not isinstance(source, InterventionSourceSpec) or source.kind != "oracle":
                continue
            opened = self._intervention(name, source, spec.retrieval.sources, cached=False)
            missing = []
            for question in questions:
                try:
                    opened.gold_positions(context_of(question, spec.seed))
                except OracleRefused:
                    missing.append(str(getattr(question, "id", question)))
            if missing:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                raise InputError(
                    f"retrieval.sources.{name} (oracle): {len(missing)} answerable question(s) have no gold passage "
                    f"(no supporting passage id in the corpus, no passage holding a gold answer): {shown}"
                )

    def _intervention(
        self, name: str, spec: InterventionSourceSpec, sources: Mapping[str, SourceSpec], *, cached: bool = True
    ) -> InterventionSource:
        """An intervention source, opened once per run over its base (itself through `get`, so
        the base's results are cached and shared by every question). `cached=False` (`prepare`,
        `check_oracles`: checks before the run folder is written) opens the base without the run's
        retrieval cache, whose database file would be the folder's first write."""
        spec.check_base(name, dict(sources))
        base_spec = sources[spec.base] if spec.base is not None else spec.default_base()
        base_name = spec.base or f"{name}.base"
        key = json.dumps([name, spec.model_dump(), base_spec.model_dump(), cached], sort_keys=True)
        with self._lock:
            if key in self._raw:
                opened = self._raw[key]
                assert isinstance(opened, InterventionSource)
                return opened
        reads_base = spec.needs_base or (spec.needs_corpus and spec.corpus is None and spec.base is not None)
        base: RetrievalSource | None = None
        if reads_base and cached:
            base = self.get(base_name, base_spec)
        elif reads_base:
            with self._lock:
                base = self._opened(_source_key(base_name, base_spec), base_name, base_spec)
        params = source_params(base) if base is not None else ""
        with self._lock:
            if key not in self._raw:
                self._raw[key] = spec.open_over(name, base, params)
            opened = self._raw[key]
        assert isinstance(opened, InterventionSource)
        return opened

    def get(
        self,
        name: str,
        source: SourceSpec,
        sources: Mapping[str, SourceSpec] | None = None,
        context: SearchContext | None = None,
    ) -> RetrievalSource:
        """The source for `name` (through the run's retrieval cache, if any). An intervention
        (`sources.interventions`) is bound to `context` (the run's seed and the question), its
        cache key naming both; `sources` are the spec's others, where its `base` is found."""
        if isinstance(source, InterventionSourceSpec):
            bound = self._intervention(name, source, sources or {}).bind(context or SearchContext())
            if self._cache_path is None:
                return bound
            with self._lock:
                return CachedSource(bound, self._run_cache(self._cache_path), bound.cache_params)
        key = _source_key(name, source)
        with self._lock:
            if key not in self._open:
                opened = self._opened(key, name, source)
                if self._cache_path is not None:
                    opened = CachedSource(opened, self._run_cache(self._cache_path), source_params(opened))
                self._open[key] = opened
            return self._open[key]

    def _run_cache(self, path: Path) -> RetrievalCache:
        """The run's retrieval cache, its database opened on first use (lock held)."""
        if self._cache is None:
            self._cache = RetrievalCache(path)
        return self._cache

    def close(self) -> None:
        """Close the retrieval cache's database and the sources that hold connections."""
        for opened in self._raw.values():
            close = getattr(opened, "close", None)
            if callable(close):
                close()
        if self._cache is not None:
            self._cache.close()

    def search_tool(self, spec: ExperimentSpec, question: Any = None) -> SearchTool | None:
        """The search tool for a condition, or None when search is not offered. `question` (a
        `Question`, or a record's question fields) is what retrieval interventions key their
        draws on, with the run's seed (`retrieval.interventions.context_of`)."""
        if not spec.agent.search:
            return None
        context = context_of(question, spec.seed)
        named = spec.retrieval.sources
        sources = {name: self.get(name, s, named, context) for name, s in named.items()}
        return SearchTool(sources, spec.retrieval.default, top_k=spec.agent.top_k)
