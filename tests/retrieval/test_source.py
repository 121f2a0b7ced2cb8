"""DenseSource results and open_dense_source's on-disk index cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branchpoint.errors import StaleIndexError
from branchpoint.retrieval import (
    DenseIndex,
    DenseSource,
    MiniLMOnnxEncoder,
    Passage,
    RetrievalSource,
    default_index_cache_dir,
    open_dense_source,
)
from branchpoint.retrieval import source as source_module
from branchpoint.traces import RetrievedDoc

from .conftest import FakeEncoder


@pytest.fixture()
def corpus_file(tmp_path: Path, facts: list[Passage]) -> Path:
    """The facts corpus written as FlashRAG jsonl."""
    path = tmp_path / "facts.jsonl"
    path.write_text("".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n"
                            for p in facts), encoding="utf-8")
    return path


@pytest.fixture()
def shared_minilm(minilm: MiniLMOnnxEncoder, monkeypatch: pytest.MonkeyPatch) -> MiniLMOnnxEncoder:
    """Make open_dense_source reuse the session's encoder instead of loading a new one."""
    monkeypatch.setattr(source_module, "get_encoder", lambda name: minilm)
    return minilm


def test_dense_source_returns_trace_docs(minilm: MiniLMOnnxEncoder, facts: list[Passage]) -> None:
    source = DenseSource("wiki", DenseIndex.build(facts, minilm), minilm)
    assert isinstance(source, RetrievalSource)
    docs = source.search("Who created the Python programming language?", k=2)
    assert len(docs) == 2 and all(isinstance(d, RetrievedDoc) for d in docs)
    top = docs[0]
    assert (top.doc_id, top.title, top.source) == ("f4", "Python (programming language)", "wiki")
    assert top.text == facts[4].text  # no title line in the text
    assert docs[0].score >= docs[1].score


def test_dense_source_refuses_other_encoder(fake_encoder: FakeEncoder, facts: list[Passage]) -> None:
    with pytest.raises(StaleIndexError, match='source "s".*"fake".*"other"'):
        DenseSource("s", DenseIndex.build(facts, fake_encoder), FakeEncoder(name="other"))


def test_open_builds_once_then_reuses_cache(shared_minilm: MiniLMOnnxEncoder, corpus_file: Path,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first = open_dense_source("facts", corpus_file, cache_dir=cache)
    [index_dir] = list(cache.iterdir())
    assert index_dir.name == f"{first.index.fingerprint[:16]}-minilm-onnx"
    mtime = (index_dir / "manifest.json").stat().st_mtime_ns

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("index was rebuilt instead of loaded from the cache")

    monkeypatch.setattr(DenseIndex, "build", no_build)
    second = open_dense_source("facts", corpus_file, cache_dir=cache)
    assert (index_dir / "manifest.json").stat().st_mtime_ns == mtime
    assert second.search("capital of Australia", k=1)[0].title == "Canberra"


def test_chunking_and_changed_corpus_get_their_own_index(
    shared_minilm: MiniLMOnnxEncoder, corpus_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    plain = open_dense_source("facts", corpus_file, cache_dir=cache)
    chunked = open_dense_source("facts", corpus_file, cache_dir=cache, chunk_words=8)
    assert len(chunked.index) > len(plain.index)
    assert any("#" in p.doc_id for p in chunked.index.passages)
    with corpus_file.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "new", "contents": '"New"\nA new passage.'}) + "\n")
    grown = open_dense_source("facts", corpus_file, cache_dir=cache)
    assert len(grown.index) == len(plain.index) + 1
    assert len(list(cache.iterdir())) == 3


def test_damaged_cache_is_rebuilt(shared_minilm: MiniLMOnnxEncoder, corpus_file: Path,
                                  tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    open_dense_source("facts", corpus_file, cache_dir=cache)
    [index_dir] = list(cache.iterdir())
    (index_dir / "index.faiss").unlink()
    again = open_dense_source("facts", corpus_file, cache_dir=cache)
    assert (index_dir / "index.faiss").is_file()
    assert again.search("highest mountain", k=1)[0].title == "Mount Everest"


def test_default_cache_dir_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path))
    assert default_index_cache_dir() == tmp_path / "indexes"
    monkeypatch.delenv("BRANCHPOINT_CACHE")
    assert default_index_cache_dir() == Path.home() / ".cache" / "branchpoint" / "indexes"
