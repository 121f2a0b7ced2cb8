"""DenseSource results and open_dense_source's on-disk index cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    path.write_text(
        "".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n" for p in facts), encoding="utf-8"
    )
    return path


@pytest.fixture()
def shared_minilm(minilm: MiniLMOnnxEncoder, monkeypatch: pytest.MonkeyPatch) -> MiniLMOnnxEncoder:
    """Make open_dense_source reuse the session's encoder instead of loading a new one."""
    monkeypatch.setattr(source_module, "get_encoder", lambda name, **kwargs: minilm)
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


def test_open_builds_once_then_reuses_cache(
    shared_minilm: MiniLMOnnxEncoder, corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_damaged_cache_is_rebuilt(shared_minilm: MiniLMOnnxEncoder, corpus_file: Path, tmp_path: Path) -> None:
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


# --- every source kind through its opener ----------------------------------------------------


def test_search_batch_matches_search(minilm: MiniLMOnnxEncoder, facts: list[Passage]) -> None:
    source = DenseSource("wiki", DenseIndex.build(facts, minilm))  # encoder: the index's own
    queries = ["capital of Australia", "Who painted the Mona Lisa?", "river in Europe"]
    batch = source.search_batch(queries, 2)
    assert batch == [source.search(q, 2) for q in queries]
    assert source.search_many(queries, 2) == batch and source.search_batch([], 2) == []
    assert all(d.source == "wiki" and d.title and d.doc_id for docs in batch for d in docs)
    assert source.cache_params == (
        f"kind=flat;corpus={source.index.fingerprint};encoder=minilm-onnx;dim=384"
    )  # unchanged for exact indexes


def test_queries_and_passages_get_their_prefixes(facts: list[Passage]) -> None:
    class Prefixed(FakeEncoder):
        query_prefix, passage_prefix = "query: ", "passage: "

    encoder = Prefixed()
    source = DenseSource("e5", DenseIndex.build(facts, encoder), encoder)
    assert all(t.startswith('passage: "') for t in encoder.texts_seen)
    encoder.texts_seen.clear()
    source.search_batch(["capital of Australia", "Everest"], 1)
    assert encoder.texts_seen == ["query: capital of Australia", "query: Everest"]


@pytest.mark.parametrize(
    ("kind", "index_kind", "params"),
    [
        ("dense", "hnsw", {"M": 8, "efSearch": 32}),
        ("dense", "ivf", {"nprobe": 1}),
        ("bm25", None, {"k1": 1.2}),
    ],
)
def test_opening_builds_once_per_kind(
    kind: str, index_kind: str | None, params: dict, shared_minilm: MiniLMOnnxEncoder, corpus_file: Path, tmp_path: Path
) -> None:
    from branchpoint.retrieval import open_bm25_source, open_dense_source

    def open_source(name: str, *, kind: str = "dense", index_kind: str | None = None, **settings: Any) -> Any:
        if kind == "bm25":
            return open_bm25_source(name, **settings)
        return open_dense_source(name, index_kind=index_kind, **settings)

    cache = tmp_path / "cache"
    first = open_source("s", kind=kind, corpus=corpus_file, index_kind=index_kind, index_params=params, cache_dir=cache)
    assert first.index.manifest.kind == (index_kind or "bm25")
    for key, value in params.items():
        assert first.index.manifest.params[key] == value
    [cached] = list(cache.iterdir())
    assert cached.name.endswith(f"-{index_kind or 'bm25'}-" + cached.name.rsplit("-", 1)[-1])
    # another search parameter reuses the cached index; another build parameter gets its own
    search_param = {"hnsw": {"M": 8, "efSearch": 64}, "ivf": {"nprobe": 2}, None: {"k1": 1.2}}[index_kind]
    again = open_source(
        "s", kind=kind, corpus=corpus_file, index_kind=index_kind, index_params=search_param, cache_dir=cache
    )
    assert len(list(cache.iterdir())) == 1
    assert again.search("capital of Australia", 1)[0].title == "Canberra"
    if index_kind == "hnsw":
        assert again.index.faiss_index.hnsw.efSearch == 64
        open_source("s", corpus=corpus_file, index_kind="hnsw", index_params={"M": 4}, cache_dir=cache)
        assert len(list(cache.iterdir())) == 2


def test_opening_a_prebuilt_directory_and_a_flashrag_file(
    shared_minilm: MiniLMOnnxEncoder, corpus_file: Path, tmp_path: Path, facts: list[Passage]
) -> None:
    import faiss

    from branchpoint.errors import InputError
    from branchpoint.retrieval import BM25Index, build_index, open_bm25_source
    from branchpoint.retrieval import open_dense_source as open_source

    built = build_index(corpus_file, tmp_path / "ivf", kind="ivf", encoder=shared_minilm)
    src = open_source("pre", index=built.out)  # no corpus needed: the index has its passages
    assert src.index.kind == "ivf" and src.search("highest mountain", 1)[0].title == "Mount Everest"
    checked = open_source("pre", index=built.out, corpus=corpus_file, index_params={"nprobe": 1})
    assert checked.index.manifest.params["nprobe"] == 1
    with pytest.raises(StaleIndexError, match="corpus changed"):
        open_source("pre", index=built.out, corpus=corpus_file, chunk_words=3)
    with pytest.raises(StaleIndexError, match="a ivf index, but kind hnsw"):
        open_source("pre", index=built.out, index_kind="hnsw")

    bm25_dir = BM25Index.build(facts).save(tmp_path / "bm25")
    assert open_bm25_source("b", index=bm25_dir).search("Danube", 1)[0].doc_id == "f5"

    # FlashRAG: a bare faiss file + the corpus jsonl, row i = line i
    flat = faiss.index_factory(384, "Flat", faiss.METRIC_INNER_PRODUCT)
    flat.add(shared_minilm.encode_passages([p.contents for p in facts]))
    faiss.write_index(flat, str(tmp_path / "e5_Flat.index"))
    flashrag_corpus = tmp_path / "flashrag.jsonl"
    flashrag_corpus.write_text(
        "".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n" for p in facts), encoding="utf-8"
    )
    fr = open_source("fr", index=tmp_path / "e5_Flat.index", corpus=flashrag_corpus)
    [doc] = fr.search("Who painted the Mona Lisa?", 1)
    assert (doc.doc_id, doc.title, doc.text, doc.source) == ("f1", "Mona Lisa", facts[1].text, "fr")
    shorter = tmp_path / "shorter.jsonl"
    shorter.write_text("".join(flashrag_corpus.read_text().splitlines(keepends=True)[:5]))
    with pytest.raises(StaleIndexError, match="holds 6 vectors but .*shorter.jsonl has 5"):
        open_source("fr", index=tmp_path / "e5_Flat.index", corpus=shorter)
    with pytest.raises(InputError, match="needs the corpus jsonl"):
        open_source("fr", index=tmp_path / "e5_Flat.index")
    with pytest.raises(InputError, match="chunk_words cannot apply"):
        open_source("fr", index=tmp_path / "e5_Flat.index", corpus=flashrag_corpus, chunk_words=50)
    with pytest.raises(InputError, match="index .*nowhere not found"):
        open_source("x", index=tmp_path / "nowhere")
