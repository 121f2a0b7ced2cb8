"""What every sentence encoder is: texts -> float32, L2-normalised vectors (inner product = cosine).

Every encoder has a stable `name` (recorded in index manifests), a dimension `dim`, and three
ways to encode: `encode_queries` and `encode_passages` add the model's query / passage prefixes
(E5: `query: ` / `passage: `; MiniLM: none), `encode` adds none (symmetric uses, such as
comparing two questions). All take `batch_size`; `max_length` (tokens) is a constructor
argument where the model allows it.
"""

from __future__ import annotations

from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from branchpoint.errors import InputError


@runtime_checkable
class Encoder(Protocol):
    """What an index needs from an encoder: a stable name, a dimension, and the encode calls."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode texts as they are (no prefix) into a (len(texts), dim) float32 unit-norm array."""
        ...

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode search queries (with the model's query prefix, if any)."""
        ...

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode passages to index (with the model's passage prefix, if any)."""
        ...


def encode_queries(encoder: Any, texts: list[str], batch_size: int = 32) -> np.ndarray:
    """Query vectors from any encoder; one with only `encode` (no prefixes) is used as it is."""
    method = getattr(encoder, "encode_queries", None) or encoder.encode
    return cast(np.ndarray, method(texts, batch_size=batch_size))


def encode_passages(encoder: Any, texts: list[str], batch_size: int = 32) -> np.ndarray:
    """Passage vectors from any encoder; one with only `encode` (no prefixes) is used as it is."""
    method = getattr(encoder, "encode_passages", None) or encoder.encode
    return cast(np.ndarray, method(texts, batch_size=batch_size))


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, got {batch_size}")


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 rows scaled to unit L2 norm (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return cast(np.ndarray, (vectors / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False))


class PrefixedEncoder:
    """Shared query / passage handling: subclasses implement `encode` (no prefix)."""

    name: str
    dim: int
    query_prefix: str = ""
    passage_prefix: str = ""

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode `query_prefix + text` for each text."""
        return self.encode([self.query_prefix + t for t in texts], batch_size=batch_size)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Encode `passage_prefix + text` for each text."""
        return self.encode([self.passage_prefix + t for t in texts], batch_size=batch_size)
