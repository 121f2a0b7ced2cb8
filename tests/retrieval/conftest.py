"""Shared fixtures for retrieval tests: the real encoder (loaded once), a fake one, data paths."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from branchpoint.retrieval import MiniLMOnnxEncoder, Passage

SHARED_CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"


class FakeEncoder:
    """Bag-of-words hashing encoder: fast, deterministic, with a name and dim tests choose.

    `calls` counts encode calls of any kind; `texts_seen` keeps every text it was given.
    """

    query_prefix = ""
    passage_prefix = ""

    def __init__(self, name: str = "fake", dim: int = 64) -> None:
        self.name = name
        self.dim = dim
        self.calls = 0
        self.texts_seen: list[str] = []

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self.encode([self.query_prefix + t for t in texts], batch_size)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self.encode([self.passage_prefix + t for t in texts], batch_size)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        self.calls += 1
        self.texts_seen.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)


@pytest.fixture(scope="session")
def minilm() -> MiniLMOnnxEncoder:
    """The real embedded encoder, built once for the whole session."""
    return MiniLMOnnxEncoder()


@pytest.fixture()
def fake_encoder() -> FakeEncoder:
    return FakeEncoder()


@pytest.fixture()
def shared_corpora() -> Path:
    """The public sample corpora beside the checkout (skipped where they are absent)."""
    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"shared sample corpora not found at {SHARED_CORPORA}")
    return SHARED_CORPORA


@pytest.fixture()
def facts() -> list[Passage]:
    """A tiny corpus where each question's answer sits in exactly one passage."""
    rows = [
        ("Canberra", "Canberra is the capital city of Australia, chosen as a compromise between Sydney and Melbourne."),
        ("Mona Lisa", "The Mona Lisa is a portrait painted by Leonardo da Vinci in the early sixteenth century."),
        ("Mount Everest", "Mount Everest is the highest mountain on Earth above sea level, in the Himalayas."),
        (
            "Photosynthesis",
            "Photosynthesis is the process by which plants turn light, water and carbon dioxide into sugar and oxygen.",
        ),
        (
            "Python (programming language)",
            "Python is a programming language created by Guido van Rossum and first released in 1991.",
        ),
        (
            "Danube",
            "The Danube is the second-longest river in Europe, flowing through ten countries into the Black Sea.",
        ),
    ]
    return [Passage(doc_id=f"f{i}", title=t, text=x) for i, (t, x) in enumerate(rows)]


@dataclass(frozen=True)
class RealEmbeddings:
    """Wikipedia summaries encoded with the real MiniLM: passages, their vectors, query vectors."""

    passages: list[Passage]
    vectors: np.ndarray
    query_vectors: np.ndarray


class PrecomputedEncoder:
    """An encoder whose passage vectors were computed beforehand (name and dim of MiniLM)."""

    name = "minilm-onnx"
    dim = 384


#: Passages of the shared Wikipedia summaries in the recall tests, and queries (their descriptions).
RECALL_PASSAGES = 1000
RECALL_QUERIES = 200


@pytest.fixture(scope="session")
def wiki_embeddings(minilm: MiniLMOnnxEncoder, request: pytest.FixtureRequest) -> RealEmbeddings:
    """1,000 Wikipedia summaries (title + first 12 words) and 200 article descriptions as
    queries, encoded with the real MiniLM once per test session.

    This CPU encodes only ~30-60 such texts a second, so the vectors are also kept in pytest's
    cache (keyed by the texts and the encoder) and reused by later sessions.
    """
    path = SHARED_CORPORA / "wikipedia_vital_summaries_en.json"
    if not path.is_file():
        pytest.skip(f"shared sample corpus not found at {path}")
    entries = list(json.loads(path.read_text(encoding="utf-8")).values())[:RECALL_PASSAGES]
    passages = [
        Passage(doc_id=f"w{i}", title=e["title"], text=" ".join(e["extract"].split()[:12]))
        for i, e in enumerate(entries)
    ]
    queries = [e.get("description") or e["title"] for e in entries[:RECALL_QUERIES]]
    texts = [p.contents for p in passages]
    key = hashlib.sha256(json.dumps([minilm.name, minilm.max_length, texts, queries]).encode()).hexdigest()[:16]
    cache = getattr(request.config, "cache", None)
    stored = cache.mkdir("branchpoint-embeddings") / f"wiki-{key}.npz" if cache is not None else None
    if stored is not None and stored.is_file():
        with np.load(stored) as data:
            return RealEmbeddings(passages, data["vectors"], data["queries"])
    vectors = minilm.encode(texts, batch_size=64)
    query_vectors = minilm.encode(queries, batch_size=64)
    if stored is not None:
        tmp = stored.with_name(f".{stored.name}.tmp.npz")
        np.savez(tmp, vectors=vectors, queries=query_vectors)
        tmp.replace(stored)
    return RealEmbeddings(passages, vectors, query_vectors)
