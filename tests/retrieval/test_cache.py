"""RetrievalCache and CachedSource: exact keys, persistence, thread safety, damaged rows."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from branchpoint.retrieval import (
    CachedSource,
    DenseIndex,
    DenseSource,
    Passage,
    RetrievalCache,
    RetrievalSource,
    source_params,
)
from branchpoint.tools import SearchTool
from branchpoint.traces import RetrievedDoc

from .conftest import FakeEncoder


class CountingSource:
    """Counts inner searches per (query, k); every call returns different scores and text, so a
    result served twice from the inner source (instead of the cache) would not compare equal."""

    def __init__(self, name: str = "wiki", delay_s: float = 0.0) -> None:
        self.name = name
        self.delay_s = delay_s
        self.calls: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()
        self._serial = 0

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        with self._lock:
            self.calls[(query, k)] += 1
            self._serial += 1
            serial = self._serial
        if self.delay_s:
            time.sleep(self.delay_s)
        return [
            RetrievedDoc(
                doc_id=f"{query}#{i}",
                score=1.0 / (i + 1) + serial * 1e-9,
                text=f"passage {i} for {query!r} (call {serial})",
                title=f"T{i}",
                source=self.name,
                rank=i,
            )
            for i in range(k)
        ]


class FailingSource:
    name = "flaky"

    def __init__(self) -> None:
        self.fail = True

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        if self.fail:
            raise ConnectionError("retrieval server down")
        return [RetrievedDoc(doc_id="d", score=1.0, text="t", source=self.name)]


@pytest.fixture()
def cache(tmp_path: Path):
    with RetrievalCache(tmp_path / "cache" / "retrieval.sqlite") as c:
        yield c


def test_miss_then_hit_calls_inner_once(cache: RetrievalCache) -> None:
    inner = CountingSource()
    source = CachedSource(inner, cache)
    assert isinstance(source, RetrievalSource) and source.name == "wiki"
    assert source.last_cache_hit is None
    first = source.search("capital of Australia", 3)
    assert source.last_cache_hit is False
    again = source.search("capital of Australia", 3)
    assert source.last_cache_hit is True
    assert inner.calls == {("capital of Australia", 3): 1}
    stats = cache.stats()
    assert (stats.entries, stats.hits, stats.misses) == (1, 1, 1) and stats.hit_rate == 0.5
    # identical by value (order, ids, scores, text, title, source, extra fields), fresh objects
    assert again == first and len(again) == 3
    assert [d.score for d in again] == [d.score for d in first]
    assert again[0].model_extra == {"rank": 0} and again[0].title == "T0"
    assert again[0] is not first[0]


def test_keys_are_exact(cache: RetrievalCache) -> None:
    wiki, news = CountingSource("wiki"), CountingSource("news")
    plain = CachedSource(wiki, cache, params="")
    other_params = CachedSource(wiki, cache, params="corpus=abc")
    other_source = CachedSource(news, cache, params="")
    plain.search("Paris?", 3)
    for source, query, k in (
        (plain, "Paris?", 2),  # other k
        (plain, "paris", 3),  # no case folding
        (plain, "Paris? ", 3),  # no whitespace stripping
        (other_params, "Paris?", 3),  # other params
        (other_source, "Paris?", 3),
    ):  # other source name
        source.search(query, k)
        assert source.last_cache_hit is False
    assert cache.stats().entries == 6 and cache.stats().hits == 0
    assert wiki.calls[("Paris?", 3)] == 2  # once per params value
    assert cache.get("wiki", "Paris?", 3, "") is not None
    assert cache.get("wiki", "Paris?", 3, "corpus=abc") is not None
    assert cache.get("wiki", "Paris?", 4, "") is None


def test_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    inner = CountingSource()
    with RetrievalCache(path) as first_cache:
        first = CachedSource(inner, first_cache).search("Mona Lisa", 2)
    with RetrievalCache(path) as reopened:
        source = CachedSource(inner, reopened)
        assert source.search("Mona Lisa", 2) == first
        assert source.last_cache_hit is True
        assert reopened.stats().hits == 1 and reopened.stats().misses == 0
    assert inner.calls[("Mona Lisa", 2)] == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        (created,) = conn.execute("SELECT created_at FROM retrieval_cache").fetchone()
    assert created.startswith("20")


def test_first_writer_wins_across_connections(tmp_path: Path) -> None:
    """Two processes that both missed a key end up handing out the same documents."""
    path = tmp_path / "r.sqlite"
    a_docs = [RetrievedDoc(doc_id="a", score=0.9, text="from A")]
    b_docs = [RetrievedDoc(doc_id="b", score=0.8, text="from B")]
    with RetrievalCache(path) as a, RetrievalCache(path) as b:
        assert a.get("s", "q", 1) is None and b.get("s", "q", 1) is None
        assert a.put("s", "q", 1, "", a_docs) == a_docs
        assert b.put("s", "q", 1, "", b_docs) == a_docs  # B gets A's stored result
        assert b.get("s", "q", 1) == a_docs
        assert b.put("s", "q", 1, "", b_docs, replace=True) == b_docs
        assert a.get("s", "q", 1) == b_docs


def test_threads_share_one_inner_call_per_key(cache: RetrievalCache) -> None:
    inner = CountingSource(delay_s=0.02)  # widen the window where threads could both miss
    source = CachedSource(inner, cache)
    queries = [f"query {i}" for i in range(4)]
    n_threads = 32
    start, searched = threading.Barrier(n_threads), threading.Barrier(n_threads)
    results: dict[int, tuple[str, list[RetrievedDoc], bool | None]] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            query = queries[i % len(queries)]
            start.wait()
            docs = source.search(query, 3)
            searched.wait()  # every thread has searched: a shared attribute would now be stale
            results[i] = (query, docs, source.last_cache_hit)
        except BaseException as exc:
            errors.append(exc)
            start.abort()
            searched.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and len(results) == n_threads
    assert inner.calls == {(q, 3): 1 for q in queries}
    for query in queries:
        mine = [(docs, hit) for q, docs, hit in results.values() if q == query]
        assert all(docs == mine[0][0] for docs, _ in mine)  # identical evidence
        assert sorted(hit for _, hit in mine) == [False] + [True] * (len(mine) - 1)
    stats = cache.stats()
    assert (stats.entries, stats.hits, stats.misses) == (4, 28, 4)


def test_damaged_rows_are_misses_and_rewritten(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "r.sqlite"
    inner = CountingSource()
    with RetrievalCache(path) as cache:
        source = CachedSource(inner, cache, params="p")
        good = source.search("q", 2)
        source.search("other", 1)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE retrieval_cache SET result = '[{\"doc_id\": ' WHERE query = 'q'")
        conn.execute("UPDATE retrieval_cache SET result = '[{\"score\": 1}]' WHERE query = 'other'")
    with RetrievalCache(path) as cache, caplog.at_level(logging.WARNING):
        source = CachedSource(inner, cache, params="p")
        fresh = source.search("q", 2)
        assert source.last_cache_hit is False and fresh != good  # searched again
        assert "damaged entry" in caplog.text and "'q'" in caplog.text
        assert source.search("q", 2) == fresh and source.last_cache_hit is True
        assert cache.get("wiki", "other", 1, "p") is None  # valid JSON, not documents
        assert cache.stats().entries == 1
    assert inner.calls[("q", 2)] == 2


def test_failed_search_stores_nothing(cache: RetrievalCache) -> None:
    inner = FailingSource()
    source = CachedSource(inner, cache)
    with pytest.raises(ConnectionError):
        source.search("q", 1)
    assert source.last_cache_hit is None and cache.stats().entries == 0
    inner.fail = False
    assert source.search("q", 1)[0].doc_id == "d" and source.last_cache_hit is False


def test_search_tool_records_cache_hit(cache: RetrievalCache) -> None:
    tool = SearchTool({"wiki": CachedSource(CountingSource(), cache)}, "wiki", top_k=2)
    first, second = tool.run("capital of Australia"), tool.run("capital of Australia")
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.docs == first.docs and tool.calls == 2  # a cached search still counts


def test_source_params(fake_encoder: FakeEncoder, facts: list[Passage], cache: RetrievalCache) -> None:
    dense = DenseSource("wiki", DenseIndex.build(facts, fake_encoder), fake_encoder)
    params = source_params(dense)
    manifest = dense.index.manifest
    assert manifest.corpus_fingerprint in params and "encoder=fake" in params
    assert "dim=64" in params
    other_corpus = DenseSource("wiki", DenseIndex.build(facts[:3], fake_encoder), fake_encoder)
    assert source_params(other_corpus) != params
    wrapped = CachedSource(dense, cache)
    assert wrapped.params == params and source_params(wrapped) == params
    assert CachedSource(dense, cache, params="").params == ""
    assert source_params(CountingSource()) == ""
    declared = CountingSource()
    declared.cache_params = "bm25:v1"  # type: ignore[attr-defined]
    assert source_params(declared) == "bm25:v1"
    docs = wrapped.search("capital of Australia", 2)
    assert wrapped.search("capital of Australia", 2) == docs and wrapped.last_cache_hit is True


def test_closed_cache_refuses(tmp_path: Path) -> None:
    cache = RetrievalCache(tmp_path / "r.sqlite")
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        cache.get("s", "q", 1)


def _process_worker(path: str, worker: int) -> list[tuple[str, str]]:
    """One process: fetch 20 keys (in a worker-specific order); each miss stores its own doc."""
    seen = []
    with RetrievalCache(path) as cache:
        for i in range(20):
            query = f"q{(i * (worker + 1)) % 20}"
            docs, _ = cache.fetch(
                "s", query, 1, "", lambda: [RetrievedDoc(doc_id=f"from-{worker}", score=float(worker), text=query)]
            )
            seen.append((query, docs[0].doc_id))
    return seen


def test_processes_share_one_file(tmp_path: Path) -> None:
    """Processes opening a new file at once all succeed and all see the same documents per key."""
    import multiprocessing

    path = str(tmp_path / "shared.sqlite")
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        runs = pool.starmap(_process_worker, [(path, w) for w in range(3)])
    first: dict[str, str] = {}
    for run in runs:
        for query, doc_id in run:
            assert first.setdefault(query, doc_id) == doc_id
    assert len(first) == 20
    with RetrievalCache(path) as cache:
        assert cache.stats().entries == 20
