"""Search-R1's and FlashRAG's formats as they are: its request sizes, its index files, its corpora.

The request and response code below follows Search-R1's own (`search_r1/search/
retrieval_request.py`: 400 queries in one `requests.post`, `raise_for_status`, `.json()`; its
agent `search_r1/llm_agent/generation.py`: `response.json()['result']`, then per hit
`doc_item['document']['contents']` split into a title line and the rest, formatted
`Doc i(Title: t) text`), so a change that would break Search-R1 breaks these tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import pytest
import requests

from branchpoint.datasets.questions import demo_corpus_path
from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval import CachedSource, DenseIndex, DenseSource, RetrievalCache, load_corpus, source_params
from branchpoint.retrieval.served_index import load_served_index
from branchpoint.retrieval.server import (
    RequestError,
    RetrievalService,
    ServerLimits,
    parse_retrieve_request,
    running_server,
)
from tests.retrieval.conftest import FakeEncoder

SEARCH_R1_QUERIES = ["What is the capital of France?", "Explain neural networks."] * 200


def searchr1_request(url: str, queries: list[str], topk: int) -> dict:
    """What Search-R1's retrieval_request.py does: one POST of every query, raise on HTTP errors."""
    response = requests.post(url, json={"queries": queries, "topk": topk, "return_scores": True}, timeout=120)
    response.raise_for_status()
    return response.json()


def searchr1_passages(hits: list[dict]) -> str:
    """What Search-R1's agent makes of one query's hits (its `_passages2string`)."""
    out = ""
    for i, hit in enumerate(hits):
        contents = hit["document"]["contents"]
        title, text = contents.split("\n")[0], "\n".join(contents.split("\n")[1:])
        out += f"Doc {i + 1}(Title: {title}) {text}\n"
    return out


class CountingIndex:
    """A DenseIndex wrapper that records the size of every search batch the server makes."""

    def __init__(self, index: DenseIndex) -> None:
        self.index, self.manifest, self.batches = index, index.manifest, []

    def __len__(self) -> int:
        return len(self.index)

    def search(self, queries: list[str], k: int):
        self.batches.append(len(queries))
        return self.index.search(queries, k)


@pytest.fixture(scope="module")
def demo_index(minilm) -> DenseIndex:
    return DenseIndex.build(load_corpus(demo_corpus_path())[:20], minilm)


def test_search_r1_traffic_is_served_in_bounded_batches(demo_index: DenseIndex) -> None:
    counting = CountingIndex(demo_index)
    with running_server(RetrievalService(counting)) as base:  # default limits
        body = searchr1_request(f"{base}/retrieve", SEARCH_R1_QUERIES, topk=5)
    result = body["result"]  # Search-R1 reads exactly this key (a refusal gave KeyError: 'result')
    assert len(result) == 400 and all(len(hits) == 5 for hits in result)
    assert counting.batches == [256, 144]  # split inside, never one 400-query encoder batch
    direct = demo_index.search(SEARCH_R1_QUERIES[:2], 5)
    for got, want in zip(result[:2], direct):
        assert [h["document"]["id"] for h in got] == [p.doc_id for p, _ in want]
        assert [h["score"] for h in got] == pytest.approx([s for _, s in want], abs=1e-5)
    formatted = searchr1_passages(result[0])
    first = direct[0][0][0]
    assert formatted.startswith(f'Doc 1(Title: "{first.title}") {first.text}\n')


def test_default_cap_is_ten_times_search_r1_traffic() -> None:
    limits = ServerLimits()
    assert limits.max_queries >= 10 * 400 and limits.max_results >= 10 * 400 * 5
    body = json.dumps({"queries": ["q"] * limits.max_queries, "topk": 3}).encode()
    assert len(parse_retrieve_request(body, limits).queries) == limits.max_queries
    assert len(body) < limits.max_body_bytes
    with pytest.raises(RequestError, match="4097 queries, more than the limit of 4096"):
        parse_retrieve_request(json.dumps({"queries": ["q"] * 4097}).encode(), limits)
    with pytest.raises(RequestError, match="2000 queries x topk 50 = 100000 passages"):
        parse_retrieve_request(json.dumps({"queries": ["q"] * 2000, "topk": 50}).encode(), limits)


# --- a FlashRAG / Search-R1 index file with its corpus, as they are -------------------------------


def write_flashrag(tmp_path: Path, minilm, rows: list[dict], factory: str = "Flat") -> tuple[Path, Path]:
    """A corpus jsonl and a faiss file built the way FlashRAG's index builder does (contents encoded
    with the encoder's passage form, inner product, `faiss.index_factory`)."""
    corpus = tmp_path / "wiki-18.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    texts = [r["contents"] if "contents" in r else f'"{r["title"]}"\n{r["text"]}' for r in rows]
    vectors = minilm.encode_passages(texts)
    index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        index.train(
            np.tile(vectors, (40, 1))
            + np.random.default_rng(0).normal(0, 0.01, (40 * len(rows), vectors.shape[1])).astype("float32")
        )
    index.add(vectors)
    path = tmp_path / f"e5_{factory.replace(',', '_')}.index"
    faiss.write_index(index, str(path))
    return path, corpus


@pytest.fixture()
def flashrag_rows() -> list[dict]:
    rows = [{"id": p.doc_id, "contents": p.contents} for p in load_corpus(demo_corpus_path())[:12]]
    rows[0] = {"id": rows[0]["id"], "contents": "Absalon\n" + rows[0]["contents"].split("\n", 1)[1]}  # unquoted
    rows[1] = {"id": "t-1", "title": "Canberra", "text": "Canberra is the capital of Australia."}  # other shape
    return rows


def test_cli_serves_a_flashrag_index_file_with_its_corpus_as_they_are(tmp_path, minilm, flashrag_rows):
    index_file, corpus = write_flashrag(tmp_path, minilm, flashrag_rows)
    cmd = [
        sys.executable,
        "-m",
        "branchpoint.cli",
        "retrieval",
        "serve",
        "--index",
        str(index_file),
        "--corpus",
        str(corpus),
        "--encoder",
        "minilm-onnx",
        "--port",
        "0",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        deadline, line = time.monotonic() + 60, ""
        while "serving" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "serving 12 passages" in line and "flat" in line, line
        base = line.split(" at ", 1)[1].split("/retrieve", 1)[0]
        for _ in range(100):
            try:
                body = searchr1_request(f"{base}/retrieve", ["Absalon", "capital of Australia"], topk=12)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    served = {h["document"]["id"]: h["document"]["contents"] for hits in body["result"] for h in hits}
    assert served[flashrag_rows[0]["id"]] == flashrag_rows[0]["contents"]  # "Absalon\n..." unchanged
    assert served["t-1"] == '"Canberra"\nCanberra is the capital of Australia.'
    for row in flashrag_rows[2:]:
        assert served[row["id"]] == row["contents"]
    assert body["result"][1][0]["document"]["id"] == "t-1"
    assert "Doc 1(Title: Absalon) " in searchr1_passages(body["result"][0])


def test_flashrag_file_checks_rows_and_dimension(tmp_path, minilm, flashrag_rows):
    index_file, corpus = write_flashrag(tmp_path, minilm, flashrag_rows)
    longer = tmp_path / "longer.jsonl"
    longer.write_text(corpus.read_text() + json.dumps({"id": "extra", "contents": '"X"\ny'}) + "\n")
    with pytest.raises(StaleIndexError, match="holds 12 vectors but .*longer.jsonl has 13 passages"):
        load_served_index(index_file, corpus=longer, encoder=minilm)
    with pytest.raises(StaleIndexError, match='vectors of dim 384, but encoder "fake" gives dim 64'):
        load_served_index(index_file, corpus=corpus, encoder=FakeEncoder())
    with pytest.raises(InputError, match="needs the corpus jsonl"):
        load_served_index(index_file, encoder=minilm)
    with pytest.raises(InputError, match="give --encoder"):
        load_served_index(index_file, corpus=corpus)


def test_factory_strings_in_manifest_and_cache_key(tmp_path, minilm, flashrag_rows):
    rows = flashrag_rows * 1  # same corpus, two index files
    flat_dir, pq_dir = tmp_path / "a", tmp_path / "b"
    flat_dir.mkdir(), pq_dir.mkdir()
    ivf_flat, corpus = write_flashrag(flat_dir, minilm, rows, "IVF2,Flat")
    ivf_pq, _ = write_flashrag(pq_dir, minilm, rows, "IVF2,PQ8x4")
    a = DenseIndex.load_flashrag(ivf_flat, corpus, minilm)
    b = DenseIndex.load_flashrag(ivf_pq, corpus, minilm)
    assert (a.kind, b.kind) == ("ivf", "ivf")
    assert (a.manifest.factory, b.manifest.factory) == ("IVF2,Flat", "IVF2,PQ8x4")
    assert "factory=IVF2,PQ8x4" in b.manifest.cache_params()
    assert a.manifest.cache_params() != b.manifest.cache_params()
    # one retrieval cache, one source name: the PQ file never gets the flat file's results
    cache = RetrievalCache(tmp_path / "cache.sqlite")
    first = CachedSource(DenseSource("wiki", a), cache, source_params(DenseSource("wiki", a)))
    first.search("capital of Australia", 3)
    second = CachedSource(DenseSource("wiki", b), cache, source_params(DenseSource("wiki", b)))
    second.search("capital of Australia", 3)
    assert second.last_cache_hit is False
    # a built index records its factory too, and our own defaults keep the old key
    built = DenseIndex.build(load_corpus(demo_corpus_path())[:40], FakeEncoder(), kind="hnsw", params={"M": 8})
    assert built.manifest.factory == "HNSW8" and "factory" not in built.manifest.cache_params()


def test_a_bm25_index_directory_is_served_too(tmp_path):
    from branchpoint.retrieval.bm25 import BM25Index

    saved = BM25Index.build(load_corpus(demo_corpus_path())[:30]).save(tmp_path / "bm25")
    index = load_served_index(saved)
    with pytest.raises(InputError, match="holds its own passages"):
        load_served_index(saved, corpus=demo_corpus_path())
    with running_server(RetrievalService(index)) as base:
        body = searchr1_request(f"{base}/retrieve", ["capital of Australia"] * 300, topk=2)
        health = requests.get(f"{base}/health", timeout=10).json()
    direct = [p.doc_id for p, _ in index.search(["capital of Australia"], 2)[0]]
    assert len(body["result"]) == 300 and [h["document"]["id"] for h in body["result"][299]] == direct
    assert health["kind"] == "bm25" and health["encoder"] is None
