"""Named retrieval sources: what the agent's search tool calls, returning trace-ready documents.

Every result carries doc id, score, title, text (without the title line) and the source's name.
Sources over an index (`DenseSource`, `BM25Source`) also answer `search_batch(queries, k)`
with one index call for all queries, and declare `cache_params` (kind, corpus fingerprint,
encoder, parameters) for the persistent retrieval cache.

`open_dense_source` and `open_bm25_source` open one from settings (what the spec's source kinds,
`branchpoint.retrieval.sources`, call): a prebuilt index directory, a FlashRAG index file with
its corpus, or a corpus whose index is built once and cached on disk by corpus fingerprint,
encoder, kind and build parameters (`default_index_cache_dir()`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval.bm25 import BM25Index
from branchpoint.retrieval.corpus import Passage, chunk_passages, load_corpus
from branchpoint.retrieval.corpus_store import fingerprint_of, open_corpus
from branchpoint.retrieval.encoder import DEFAULT_ENCODER, get_encoder
from branchpoint.retrieval.encoder_base import Encoder, encode_queries
from branchpoint.retrieval.index import DenseIndex
from branchpoint.retrieval.index_kinds import dense_kind_names
from branchpoint.retrieval.index_kinds import index_kind as kind_of_index
from branchpoint.retrieval.manifest import check_encoder
from branchpoint.traces import RetrievedDoc

log = logging.getLogger(__name__)


@runtime_checkable
class RetrievalSource(Protocol):
    """A named place to search: one query in, the top-k documents out, best first."""

    name: str

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """The k best documents for `query`, each tagged with this source's name."""
        ...


class IndexSource:
    """A RetrievalSource over an index with `search(queries, k)` and a `manifest`."""

    def __init__(self, name: str, index: Any) -> None:
        self.name = name
        self.index = index

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.index.manifest.kind}, {len(self.index)} passages)"

    @property
    def cache_params(self) -> str:
        """Kind, corpus fingerprint, encoder, dimension and parameters: the cache key part."""
        return cast(str, self.index.manifest.cache_params())

    def _docs(self, hits: list[tuple[Passage, float]]) -> list[RetrievedDoc]:
        name = self.name
        return [
            RetrievedDoc(doc_id=p.doc_id, score=score, text=p.text, title=p.title or None, source=name)
            for p, score in hits
        ]

    def _hits(self, queries: list[str], k: int) -> list[list[tuple[Passage, float]]]:
        return cast(list[list[tuple[Passage, float]]], self.index.search(queries, k))

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """Top-k passages for `query` as RetrievedDoc (text without the title line; source = name)."""
        return self._docs(self._hits([query], k)[0])

    def search_batch(self, queries: list[str], k: int) -> list[list[RetrievedDoc]]:
        """`search` for many queries at once (one encoder call, one index call)."""
        return [self._docs(hits) for hits in self._hits(list(queries), k)]

    #: The name SearchR1Source gives the same call.
    search_many = search_batch


class DenseSource(IndexSource):
    """A RetrievalSource over a DenseIndex: encodes the query, returns passages with their scores."""

    def __init__(self, name: str, index: DenseIndex, encoder: Encoder | None = None) -> None:
        """Pair an index with the encoder it was built with (StaleIndexError if they differ)."""
        encoder = encoder if encoder is not None else index.encoder
        check_encoder(index.manifest, encoder, f'source "{name}"')
        super().__init__(name, index)
        self.encoder = encoder

    def _hits(self, queries: list[str], k: int) -> list[list[tuple[Passage, float]]]:
        if not queries:
            return []
        return cast(
            list[list[tuple[Passage, float]]], self.index.search_vectors(encode_queries(self.encoder, queries), k)
        )


class BM25Source(IndexSource):
    """A RetrievalSource over a BM25Index (scores are BM25 scores, not cosines)."""

    def __init__(self, name: str, index: BM25Index) -> None:
        super().__init__(name, index)


def default_index_cache_dir() -> Path:
    """Where built indexes are kept: `$BRANCHPOINT_CACHE/indexes`, else ~/.cache/branchpoint/indexes."""
    root = os.environ.get("BRANCHPOINT_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "branchpoint"
    return base / "indexes"


def index_cache_path(
    cache_dir: Path,
    fingerprint: str,
    encoder_name: str,
    kind: str = "flat",
    build_params: Mapping[str, Any] | None = None,
) -> Path:
    """Directory of the cached index for one corpus fingerprint, encoder, kind and build parameters.

    An exact index with default parameters keeps the original `<fp16>-<encoder>` name.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder_name)
    name = f"{fingerprint[:16]}-{safe}"
    if kind != "flat" or build_params:
        digest = hashlib.sha256(json.dumps(dict(build_params or {}), sort_keys=True).encode()).hexdigest()[:8]
        name += f"-{kind}-{digest}"
    return cache_dir / name


def _build_params(kind: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    searchable = kind_of_index(kind).search_params
    return {k: v for k, v in (params or {}).items() if k not in searchable}


def _load_passages(corpus: str | Path, fmt: str, chunk_words: int | None) -> Sequence[Passage]:
    """The corpus's passages: a jsonl corpus memory-mapped (unless chunked), others read whole."""
    if chunk_words is None:
        return open_corpus(corpus, fmt)
    return chunk_passages(load_corpus(corpus, fmt), chunk_words)


def open_dense_source(
    name: str,
    corpus: str | Path | None = None,
    encoder_name: str = DEFAULT_ENCODER,
    cache_dir: Path | None = None,
    chunk_words: int | None = None,
    progress: bool = False,
    *,
    fmt: str = "auto",
    index_kind: str | None = None,
    index: str | Path | None = None,
    index_params: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> DenseSource:
    """Open a dense source (what a spec's `kind: dense` opens).

    - `index` a directory: a saved index (ours), checked against `index_kind`, `index_params`
      and, when `corpus` is given, that corpus's fingerprint (after chunking).
    - `index` a file: a FlashRAG faiss index whose row i is passage i of `corpus` (required).
    - no `index`: `corpus` (required) indexed once with `index_kind` (default flat) and cached
      under `cache_dir` (default `default_index_cache_dir()`); a stale or damaged cached index is
      rebuilt.
    """
    if index_kind is not None and index_kind not in dense_kind_names():
        raise InputError(
            f'source "{name}": unknown index_kind {index_kind!r} (expected one of: {", ".join(dense_kind_names())})'
        )
    enc = get_encoder(encoder_name) if device == "cpu" else get_encoder(encoder_name, device=device)
    if index is not None:
        return _open_prebuilt_dense(
            name,
            Path(index),
            enc,
            corpus=corpus,
            fmt=fmt,
            chunk_words=chunk_words,
            index_kind=index_kind,
            index_params=index_params,
            device=device,
        )
    if corpus is None:
        raise InputError(f'source "{name}": give a corpus file or a prebuilt index')
    passages = _load_passages(corpus, fmt, chunk_words)
    fingerprint = fingerprint_of(passages)
    cache = Path(cache_dir) if cache_dir else default_index_cache_dir()
    index_kind = index_kind or "flat"
    path = index_cache_path(cache, fingerprint, enc.name, index_kind, _build_params(index_kind, index_params))
    if path.exists():
        try:
            loaded = DenseIndex.load(
                path, enc, expected_fingerprint=fingerprint, kind=index_kind, params=index_params, device=device
            )
            return DenseSource(name, loaded, enc)
        except InputError as exc:  # stale or damaged: rebuild below
            log.warning("rebuilding cached index: %s", exc)
    dense = DenseIndex.build(passages, enc, progress=progress, kind=index_kind, params=index_params, device=device)
    _cache_save(dense, path)
    return DenseSource(name, dense, enc)


def open_bm25_source(
    name: str,
    corpus: str | Path | None = None,
    *,
    fmt: str = "auto",
    chunk_words: int | None = None,
    index: str | Path | None = None,
    index_params: Mapping[str, Any] | None = None,
    cache_dir: Path | None = None,
    progress: bool = False,
) -> BM25Source:
    """Open a BM25 source (what a spec's `kind: bm25` opens): a saved bm25 `index` directory
    (checked against `corpus` when given), or `corpus` indexed once and cached under `cache_dir`."""
    if index is not None:
        path = Path(index)
        if path.is_dir():
            expected = fingerprint_of(_load_passages(corpus, fmt, chunk_words)) if corpus is not None else None
            return BM25Source(name, BM25Index.load(path, expected, params=index_params))
        if not path.exists():
            raise InputError(
                f'source "{name}": index {path} not found (expected a directory that '
                "`branchpoint index build --kind bm25` wrote)"
            )
        raise InputError(
            f'source "{name}": index {path} is a file; a bm25 index is a directory '
            "that `branchpoint index build --kind bm25` wrote"
        )
    if corpus is None:
        raise InputError(f'source "{name}": give a corpus file or a prebuilt index')
    passages = _load_passages(corpus, fmt, chunk_words)
    fingerprint = fingerprint_of(passages)
    cache = Path(cache_dir) if cache_dir else default_index_cache_dir()
    path = index_cache_path(cache, fingerprint, "bm25", "bm25", _build_params("bm25", index_params))
    if path.exists():
        try:
            return BM25Source(name, BM25Index.load(path, fingerprint, params=index_params))
        except InputError as exc:  # stale or damaged: rebuild below
            log.warning("rebuilding cached index: %s", exc)
    built = BM25Index.build(passages, index_params, progress=progress)
    _cache_save(built, path)
    return BM25Source(name, built)


def _cache_save(index: DenseIndex | BM25Index, path: Path) -> None:
    try:
        index.save(path)
    except OSError as exc:  # e.g. another process saved the same index meanwhile
        log.warning("could not cache index at %s: %s", path, exc)


def _open_prebuilt_dense(
    name: str,
    path: Path,
    enc: Encoder,
    *,
    corpus: str | Path | None,
    fmt: str,
    chunk_words: int | None,
    index_kind: str | None,
    index_params: Mapping[str, Any] | None,
    device: str,
) -> DenseSource:
    """A saved dense index directory, or a FlashRAG index file with its corpus."""
    if path.is_dir():
        expected = None
        if corpus is not None:
            expected = fingerprint_of(_load_passages(corpus, fmt, chunk_words))
        loaded = DenseIndex.load(
            path, enc, expected_fingerprint=expected, kind=index_kind, params=index_params, device=device
        )
        return DenseSource(name, loaded, enc)
    if not path.exists():
        raise InputError(
            f'source "{name}": index {path} not found (expected a directory that '
            "`branchpoint index build` wrote, or a FlashRAG faiss index file)"
        )
    if corpus is None:
        raise InputError(
            f'source "{name}": the FlashRAG index file {path} needs the corpus jsonl it was built from (set corpus)'
        )
    if chunk_words is not None:
        raise InputError(
            f'source "{name}": chunk_words cannot apply to a FlashRAG index file '
            "(its rows are the corpus lines as they are)"
        )
    loaded = DenseIndex.load_flashrag(path, corpus, enc, fmt=fmt, params=index_params, device=device)
    if index_kind is not None and loaded.kind != index_kind:
        raise StaleIndexError(
            f'source "{name}": {path} is a {loaded.kind} index, but index_kind {index_kind} was asked for'
        )
    return DenseSource(name, loaded, enc)
