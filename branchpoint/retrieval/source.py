"""Named retrieval sources: what the agent's search tool calls, returning trace-ready documents."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Protocol, runtime_checkable

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval.corpus import chunk_passages, corpus_fingerprint, load_corpus
from branchpoint.retrieval.encoder import DEFAULT_ENCODER, Encoder, get_encoder
from branchpoint.retrieval.index import DenseIndex
from branchpoint.traces import RetrievedDoc

log = logging.getLogger(__name__)


@runtime_checkable
class RetrievalSource(Protocol):
    """A named place to search: one query in, the top-k documents out, best first."""

    name: str

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """The k best documents for `query`, each tagged with this source's name."""
        ...


class DenseSource:
    """A RetrievalSource over a DenseIndex: encodes the query, returns passages with their scores."""

    def __init__(self, name: str, index: DenseIndex, encoder: Encoder) -> None:
        """Pair an index with the encoder it was built with (StaleIndexError if they differ)."""
        if encoder.name != index.manifest.encoder or encoder.dim != index.manifest.dim:
            raise StaleIndexError(
                f'source "{name}": index was built with encoder "{index.manifest.encoder}" '
                f'(dim {index.manifest.dim}) but encoder "{encoder.name}" (dim {encoder.dim}) '
                "was given"
            )
        self.name = name
        self.index = index
        self.encoder = encoder

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """Top-k passages for `query` as RetrievedDoc (text without the title line; source = name)."""
        hits = self.index.search_vectors(self.encoder.encode([query]), k)[0]
        return [
            RetrievedDoc(doc_id=p.doc_id, score=score, text=p.text, title=p.title or None,
                         source=self.name)
            for p, score in hits
        ]


def default_index_cache_dir() -> Path:
    """Where built indexes are kept: `$BRANCHPOINT_CACHE/indexes`, else ~/.cache/branchpoint/indexes."""
    root = os.environ.get("BRANCHPOINT_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "branchpoint"
    return base / "indexes"


def index_cache_path(cache_dir: Path, fingerprint: str, encoder_name: str) -> Path:
    """Directory of the cached index for one corpus fingerprint and encoder."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder_name)
    return cache_dir / f"{fingerprint[:16]}-{safe}"


def open_dense_source(
    name: str,
    corpus: str | Path,
    encoder_name: str = DEFAULT_ENCODER,
    cache_dir: Path | None = None,
    chunk_words: int | None = None,
    progress: bool = False,
) -> DenseSource:
    """Load a corpus (optionally chunked) and its cached index, building and caching it if needed."""
    passages = load_corpus(corpus)
    if chunk_words is not None:
        passages = chunk_passages(passages, chunk_words)
    fingerprint = corpus_fingerprint(passages)
    encoder = get_encoder(encoder_name)
    path = index_cache_path(Path(cache_dir) if cache_dir else default_index_cache_dir(),
                            fingerprint, encoder.name)
    if path.exists():
        try:
            index = DenseIndex.load(path, encoder, expected_fingerprint=fingerprint)
            return DenseSource(name, index, encoder)
        except InputError as exc:  # stale or damaged: rebuild below
            log.warning("rebuilding cached index: %s", exc)
    index = DenseIndex.build(passages, encoder, progress=progress)
    try:
        index.save(path)
    except OSError as exc:  # e.g. another process saved the same index meanwhile
        log.warning("could not cache index at %s: %s", path, exc)
    return DenseSource(name, index, encoder)
