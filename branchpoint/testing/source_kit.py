"""Conformance of a retrieval source kind and of the source it opens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from branchpoint.errors import InputError
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.retrieval.source import RetrievalSource
from branchpoint.retrieval.sources.base import DEFAULT_KIND, SourceSpec
from branchpoint.testing.demo import QUERIES
from branchpoint.traces import RetrievedDoc


def _fail(name: str, problem: str) -> AssertionError:
    return AssertionError(f'source "{name}": {problem}')


def check_source_spec(spec: SourceSpec, name: str = "kit") -> RetrievalSource:
    """AssertionError unless the settings fit the source contract (its class registered or
    registrable as a source kind), survive a dump and reload as a spec writes and reads them,
    pass their own `check`, and open a source; returns the opened source."""
    cls = type(spec)
    try:
        REGISTRY.check_component("source", spec.kind, cls, {}, f"{cls.__module__}:{cls.__qualname__}")
        spec.check(name)
    except (RegistryError, InputError) as exc:
        raise AssertionError(str(exc)) from None
    dumped = spec.model_dump()
    if dumped.get("kind", DEFAULT_KIND) != spec.kind:  # the default kind may be left out
        raise _fail(
            name, f"its dump has kind {dumped.get('kind')!r}, not {spec.kind!r} (a spec picks the class by kind)"
        )
    if cls.model_validate(dumped) != spec:
        raise _fail(name, "its settings read back from their dump are other settings")
    if ("source", spec.kind) in REGISTRY:
        from branchpoint.experiments.spec import ExperimentSpec

        exp = ExperimentSpec(name="kit", retrieval={"default": name, "sources": {name: dumped}})
        if exp.retrieval.sources[name] != spec:
            raise _fail(name, f"a spec's retrieval.sources.{name} with these settings reads as other settings")
    return spec.open(name)


def check_search(source: Any, queries: Sequence[str] = QUERIES, *, ranked: bool = True) -> None:
    """AssertionError unless `source` is a RetrievalSource (a `name`, `search(query, k)`) whose
    results are at most k RetrievedDocs tagged with its name, the same when asked again, and
    `search_batch` (where it has one) the same as one search per query; with `ranked`, also
    best first and each shorter list the start of the longer one (`ranked=False` for a source
    that reorders or draws results on purpose, as the retrieval interventions do)."""
    name = getattr(source, "name", type(source).__name__)
    if not isinstance(source, RetrievalSource):
        raise _fail(str(name), f"{type(source).__name__} is not a RetrievalSource (a `name` and search(query, k))")
    for query in queries:
        top3 = source.search(query, 3)
        where = f"search({query!r}, 3)"
        if not isinstance(top3, list) or not all(isinstance(d, RetrievedDoc) for d in top3):
            raise _fail(name, f"{where} returned {type(top3).__name__}, not a list of RetrievedDoc")
        if len(top3) > 3:
            raise _fail(name, f"{where} returned {len(top3)} documents")
        if any(d.source not in (None, name) for d in top3):
            raise _fail(name, f"{where}: documents tagged with source {top3[0].source!r}, not {name!r}")
        scores = [d.score for d in top3]
        if ranked and scores != sorted(scores, reverse=True):
            raise _fail(name, f"{where}: scores {scores} are not best first")
        if [d.doc_id for d in source.search(query, 3)] != [d.doc_id for d in top3]:
            raise _fail(name, f"{where} asked again gave other documents")
        top1 = source.search(query, 1)
        if ranked and [d.doc_id for d in top1] != [d.doc_id for d in top3[:1]]:
            raise _fail(name, f"search({query!r}, 1) is not the first of search({query!r}, 3)")
    batch = getattr(source, "search_batch", None)
    if callable(batch):
        got = [[d.doc_id for d in docs] for docs in batch(list(queries), 3)]
        if got != [[d.doc_id for d in source.search(q, 3)] for q in queries]:
            raise _fail(name, "search_batch gave other documents than one search per query")


def check_source(
    spec_or_source: SourceSpec | Any, name: str = "kit", *, queries: Sequence[str] = QUERIES, ranked: bool = True
) -> Any:
    """Exercise a source kind (its settings, a `SourceSpec`) or an opened source as a run does
    and raise AssertionError on a violation (`check_source_spec`, then `check_search` on the
    source it opens). Returns the source."""
    source = check_source_spec(spec_or_source, name) if isinstance(spec_or_source, SourceSpec) else spec_or_source
    check_search(source, queries, ranked=ranked)
    return source
