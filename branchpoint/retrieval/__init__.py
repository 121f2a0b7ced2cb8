"""Retrieval: corpora and chunking, encoders, dense FAISS indexes, named sources for agents, and
the persistent exact-query cache."""

from branchpoint.retrieval._deps import MissingPackageError
from branchpoint.retrieval.cache import CachedSource, CacheStats, RetrievalCache, source_params
from branchpoint.retrieval.corpus import (
    CORPUS_FORMATS,
    Passage,
    chunk_passages,
    corpus_fingerprint,
    load_corpus,
)
from branchpoint.retrieval.encoder import (
    DEFAULT_ENCODER,
    ENCODERS,
    Encoder,
    MiniLMOnnxEncoder,
    get_encoder,
)
from branchpoint.retrieval.index import DenseIndex, IndexManifest, read_manifest
from branchpoint.retrieval.source import (
    DenseSource,
    RetrievalSource,
    default_index_cache_dir,
    open_dense_source,
)

__all__ = [
    "CORPUS_FORMATS",
    "CacheStats",
    "CachedSource",
    "DEFAULT_ENCODER",
    "ENCODERS",
    "DenseIndex",
    "DenseSource",
    "Encoder",
    "IndexManifest",
    "MiniLMOnnxEncoder",
    "MissingPackageError",
    "Passage",
    "RetrievalCache",
    "RetrievalSource",
    "chunk_passages",
    "corpus_fingerprint",
    "default_index_cache_dir",
    "get_encoder",
    "load_corpus",
    "open_dense_source",
    "read_manifest",
    "source_params",
]
