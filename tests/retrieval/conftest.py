"""Shared fixtures for retrieval tests: the real encoder (loaded once), a fake one, data paths."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from branchpoint.retrieval import MiniLMOnnxEncoder, Passage

SHARED_CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"


class FakeEncoder:
    """Bag-of-words hashing encoder: fast, deterministic, with a name and dim tests choose."""

    def __init__(self, name: str = "fake", dim: int = 64) -> None:
        self.name = name
        self.dim = dim

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
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
        ("Canberra", "Canberra is the capital city of Australia, chosen as a compromise between "
                     "Sydney and Melbourne."),
        ("Mona Lisa", "The Mona Lisa is a portrait painted by Leonardo da Vinci in the early "
                      "sixteenth century."),
        ("Mount Everest", "Mount Everest is the highest mountain on Earth above sea level, in "
                          "the Himalayas."),
        ("Photosynthesis", "Photosynthesis is the process by which plants turn light, water and "
                           "carbon dioxide into sugar and oxygen."),
        ("Python (programming language)", "Python is a programming language created by Guido "
                                          "van Rossum and first released in 1991."),
        ("Danube", "The Danube is the second-longest river in Europe, flowing through ten "
                   "countries into the Black Sea."),
    ]
    return [Passage(doc_id=f"f{i}", title=t, text=x) for i, (t, x) in enumerate(rows)]
