"""BM25 through bm25s: search, saving in bm25s's format with our manifest, stale refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval import BM25Index, BM25Source, Passage, corpus_fingerprint, load_index


def test_search_ranks_by_shared_terms(facts: list[Passage]) -> None:
    index = BM25Index.build(facts)
    hits = index.search(["capital city of Australia", "Leonardo da Vinci portrait", "river Black Sea"], k=3)
    assert [h[0][0].title for h in hits] == ["Canberra", "Mona Lisa", "Danube"]
    assert all(s > 0 for row in hits for _, s in row)
    scores = [s for _, s in hits[0]]
    assert scores == sorted(scores, reverse=True)


def test_no_shared_term_gives_no_documents(facts: list[Passage]) -> None:
    index = BM25Index.build(facts)
    assert index.search(["zzzz qqqq", "", "the of and"], k=3) == [[], [], []]  # stopwords only
    assert len(index.search(["Python"], k=50)[0]) == 1  # k larger than the corpus
    assert index.search([], k=3) == []
    with pytest.raises(InputError, match="k .* at least 1"):
        index.search(["q"], k=0)
    with pytest.raises(InputError, match="empty corpus"):
        BM25Index.build([])


def test_title_is_searchable(facts: list[Passage]) -> None:
    hits = BM25Index.build(facts).search(["photosynthesis"], k=1)
    assert hits[0][0][0].doc_id == "f3"


def test_save_load_round_trip(facts: list[Passage], tmp_path: Path) -> None:
    built = BM25Index.build(facts, {"k1": 1.2, "b": 0.5})
    out = built.save(tmp_path / "bm25")
    assert sorted(p.name for p in out.iterdir()) == [
        "bm25",
        "manifest.json",
        "passages.jsonl",
        "passages.jsonl.bpoffsets.json",
        "passages.jsonl.bpoffsets.npy",
    ]
    assert (out / "bm25" / "params.index.json").is_file()  # bm25s's own format
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "bm25" and manifest["encoder"] is None
    assert manifest["params"] == {"k1": 1.2, "b": 0.5, "method": "lucene", "stopwords": "en"}
    loaded = BM25Index.load(out, corpus_fingerprint(facts))
    queries = ["highest mountain Himalayas", "programming language"]
    assert loaded.search(queries, 3) == built.search(queries, 3)
    assert isinstance(load_index(out), BM25Index)

    with pytest.raises(StaleIndexError, match="corpus changed"):
        BM25Index.load(out, corpus_fingerprint(facts[:2]))
    with pytest.raises(StaleIndexError, match="built with k1=1.2 but k1=2.0"):
        BM25Index.load(out, params={"k1": 2.0})
    with pytest.raises(StaleIndexError, match="a bm25 index, but kind flat"):
        load_index(out, kind="flat")


def test_source_docs(facts: list[Passage]) -> None:
    source = BM25Source("bm25", BM25Index.build(facts))
    [top] = source.search("Guido van Rossum", 1)
    assert (top.doc_id, top.title, top.text, top.source) == (
        "f4",
        "Python (programming language)",
        facts[4].text,
        "bm25",
    )
    assert source.cache_params.startswith("kind=bm25;corpus=") and '"k1": 1.5' in source.cache_params
    batch = source.search_batch(["Guido van Rossum", "Everest"], 1)
    assert batch[0] == [top] and batch[1][0].doc_id == "f2"
