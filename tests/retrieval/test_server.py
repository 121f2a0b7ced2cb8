"""The Search-R1-compatible retrieval server (real HTTP, real MiniLM index) and its client source."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.datasets.questions import demo_corpus_path
from branchpoint.errors import BranchpointError
from branchpoint.models.call import TransportError
from branchpoint.retrieval import CachedSource, DenseIndex, DenseSource, RetrievalCache, load_corpus, source_params
from branchpoint.retrieval.searchr1 import (
    RetrievalServerError,
    RetrievalUnavailableError,
    SearchR1Source,
    content_id,
    retrieve_url,
)
from branchpoint.retrieval.served_index import load_index_dir
from branchpoint.retrieval.server import RetrievalService, ServerLimits, running_server

LIMITS = ServerLimits(max_queries=4, max_topk=5, max_body_bytes=4096)
QUERIES = ["What is the capital of Australia?", "Who painted the Mona Lisa?", "Sydney Opera House architect"]


@pytest.fixture(scope="module")
def index(minilm) -> DenseIndex:
    """A real MiniLM index over the first 20 demo passages."""
    return DenseIndex.build(load_corpus(demo_corpus_path())[:20], minilm)


@pytest.fixture(scope="module")
def url(index):
    with running_server(RetrievalService(index, LIMITS)) as base:
        yield base


def post(url: str, **kwargs) -> httpx.Response:
    return httpx.post(f"{url}/retrieve", timeout=30, **kwargs)


def test_retrieve_with_scores_matches_the_index(url, index):
    response = post(url, json={"queries": QUERIES, "topk": 3, "return_scores": True})
    assert response.status_code == 200
    result = response.json()["result"]
    assert len(result) == len(QUERIES)
    for hits, expected in zip(result, index.search(QUERIES, 3)):
        assert [h["document"]["id"] for h in hits] == [p.doc_id for p, _ in expected]
        assert [h["document"]["contents"] for h in hits] == [p.contents for p, _ in expected]
        assert [h["score"] for h in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
        assert set(hits[0]) == {"document", "score"} and set(hits[0]["document"]) == {"id", "contents"}
    assert result[0][0]["document"]["contents"].startswith('"Canberra"\n')


def test_retrieve_without_scores_returns_bare_documents_and_default_topk(url):
    response = post(url, json={"queries": ["capital of Australia"]})
    assert response.status_code == 200
    (hits,) = response.json()["result"]
    assert len(hits) == 3  # the server's default topk, like Search-R1's --topk 3
    assert all(set(doc) == {"id", "contents"} for doc in hits)
    assert hits[0]["id"] == "demo-001"
    explicit = post(url, json={"queries": ["capital of Australia"], "topk": 2, "return_scores": False})
    assert explicit.json()["result"][0] == hits[:2]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"topk": 3}', 'field "queries" missing'),
        (b'{"queries": "capital"}', 'field "queries" must be a list'),
        (b'{"queries": ["a", 7]}', 'field "queries[1]" must be a string'),
        (b'{"queries": ["a", "b", "c", "d", "e"]}', "more than the limit of 4"),
        (b'{"queries": ["a"], "topk": 6}', "more than the limit of 5"),
        (b'{"queries": ["a"], "topk": 0}', "at least 1"),
        (b'{"queries": ["a"], "topk": "3"}', 'field "topk" must be an integer'),
        (b'{"queries": ["a"], "topk": 2.5}', 'field "topk" must be an integer'),
        (b'{"queries": ["a"], "return_scores": "yes"}', 'field "return_scores" must be true or false'),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 2000 + b"]" * 2000, "nested too deeply"),  # deeper than the JSON parser's stack
        (b'{"queries": ' + b"[" * 1500 + b"]" * 1500 + b"}", "nested too deeply"),
        (b'{"queries": ["a"], "topk": NaN}', 'field "topk" must be an integer'),
    ],
)
def test_bad_requests_get_400_with_a_reason(url, body, reason):
    response = post(url, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert reason in response.json()["error"]


class SearchR1Client:
    """The request / response path of Search-R1's own agent (`search_r1/llm_agent/generation.py`
    at PeterGriffinJin/Search-R1 a14dc3a), restated: it has torch and verl imports, so it cannot be
    imported here. `execute_predictions` (lines 367-375) collects the bodies of the rollouts whose
    action is `search` (`postprocess_predictions`, 420-426: the first `<(search|answer)>` tag,
    its body `.strip()`-ed, so `<search></search>` is `""`) and always calls `batch_search`, so a
    turn where no rollout searched sends `queries: []`; `_batch_search` (450-458) posts
    `{"queries", "topk", "return_scores": True}`; `batch_search` (446-448) reads
    `.json()['result']` (a KeyError on an error body) and `_passages2string` (460-469) renders each
    list from `doc_item['document']['contents']`, its first line the title; `execute_predictions`
    then asserts one result per search (373) and wraps it in `<information>` (391)."""

    def __init__(self, url: str, topk: int = 3) -> None:
        self.url, self.topk = f"{url}/retrieve", topk

    def batch_search(self, queries: list[str]) -> list[str]:
        payload = {"queries": queries, "topk": self.topk, "return_scores": True}
        results = httpx.post(self.url, json=payload, timeout=30).json()["result"]
        return [self.passages2string(result) for result in results]

    @staticmethod
    def passages2string(retrieval_result: list[dict]) -> str:
        out = ""
        for idx, doc_item in enumerate(retrieval_result):
            content = doc_item["document"]["contents"]
            title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
            out += f"Doc {idx + 1}(Title: {title}) {text}\n"
        return out

    def execute_predictions(self, predictions: list[str]) -> list[str]:
        """The observations of one turn (`generation.py` 367-405, active rollouts only)."""
        parsed = [re.search(r"<(search|answer)>(.*?)</\1>", p, re.DOTALL) for p in predictions]
        actions = [(m.group(1), m.group(2).strip()) if m else (None, "") for m in parsed]
        results = self.batch_search([body for action, body in actions if action == "search"])
        assert len(results) == sum(1 for action, _ in actions if action == "search")
        return [
            f"\n\n<information>{results.pop(0).strip()}</information>\n\n" if action == "search" else ""
            for action, _ in actions
        ]


def test_searchr1_turns_with_no_search_and_an_empty_search_get_200_as_upstream(url, index):
    """Search-R1 sends `queries: []` when no rollout searched and `""` for `<search></search>`;
    its own server answers both with 200 (an empty result list; the empty query searched like any
    other), and its client reads `result` from whatever comes back."""
    client = SearchR1Client(url)
    assert client.execute_predictions(["<answer> Canberra </answer>", "no tag at all"]) == ["", ""]
    empty = post(url, json={"queries": [], "topk": 3, "return_scores": True})
    assert empty.status_code == 200 and empty.json() == {"result": []}
    [blank, real] = client.execute_predictions(
        ["<think>hm</think><search></search>", "<search> capital of Australia </search>"]
    )
    expected = [p.doc_id for p, _ in index.search([""], 3)[0]]
    got = post(url, json={"queries": ["", "   "], "topk": 3, "return_scores": True}).json()["result"]
    assert [[h["document"]["id"] for h in hits] for hits in got] == [
        expected,
        [p.doc_id for p, _ in index.search(["   "], 3)[0]],
    ]
    assert blank.startswith("\n\n<information>Doc 1(Title: ") and blank.count("Doc ") == 3
    assert real.startswith('\n\n<information>Doc 1(Title: "Canberra") ')


def test_bm25_answers_an_empty_query_with_no_passages(minilm):
    """BM25 has no term to match in `""`: no passages for it (pyserini finds no hit upstream)."""
    from branchpoint.retrieval import BM25Index

    bm25 = BM25Index.build(load_corpus(demo_corpus_path())[:20])
    with running_server(RetrievalService(bm25, LIMITS)) as base:
        got = post(base, json={"queries": ["", "capital of Australia"], "topk": 2}).json()["result"]
    assert got[0] == [] and [d["id"] for d in got[1]] == [
        p.doc_id for p, _ in bm25.search(["capital of Australia"], 2)[0]
    ]


def test_body_over_the_limit_gets_413(url):
    response = post(url, content=b"x" * 5000)
    assert response.status_code == 413
    assert "4096 bytes" in response.json()["error"]

    def chunks():  # no Content-Length: counted while streaming
        for _ in range(8):
            yield b"y" * 1000

    response = post(url, content=chunks())
    assert response.status_code == 413
    assert "--max-body-bytes" in response.json()["error"]


def test_health_and_unknown_routes(url, index):
    health = httpx.get(f"{url}/health").json()
    assert health["status"] == "ok" and health["passages"] == 20 and health["encoder"] == "minilm-onnx"
    assert health["corpus_fingerprint"] == index.fingerprint and health["limits"]["max_topk"] == 5
    missing = httpx.get(f"{url}/search")
    assert missing.status_code == 404 and "POST /retrieve" in missing.json()["error"]
    wrong = httpx.get(f"{url}/retrieve")
    assert wrong.status_code == 405 and "POST" in wrong.json()["error"]


def test_searchr1_source_round_trip_equals_direct_search(url, index, minilm):
    direct = DenseSource("direct", index, minilm)
    with SearchR1Source("remote", url) as remote:
        for query in QUERIES:
            got, want = remote.search(query, 4), direct.search(query, 4)
            assert [(d.doc_id, d.title, d.text) for d in got] == [(d.doc_id, d.title, d.text) for d in want]
            assert [d.score for d in got] == pytest.approx([d.score for d in want], abs=1e-5)
            assert {d.source for d in got} == {"remote"}
        batched = remote.search_many(QUERIES, 2)
        assert [[d.doc_id for d in hits] for hits in batched] == [
            [d.doc_id for d in direct.search(q, 2)] for q in QUERIES
        ]
        assert remote.cache_params == f"{url}/retrieve" == source_params(remote)


def test_searchr1_source_through_the_cache_keys_by_server(url, tmp_path):
    with SearchR1Source("wiki", url) as remote, RetrievalCache(tmp_path / "cache.sqlite") as cache:
        cached = CachedSource(remote, cache)
        first = cached.search("capital of Australia", 2)
        again = cached.search("capital of Australia", 2)
        assert cached.last_cache_hit is True and again == first
        assert cached.params == f"{url}/retrieve"
        assert cache.get("wiki", "capital of Australia", 2, "http://elsewhere:1/retrieve") is None


def test_searchr1_source_reports_refusals_with_the_server_reason(url):
    with SearchR1Source("remote", url) as remote:
        with pytest.raises(RetrievalServerError, match="HTTP 400.*more than the limit of 5") as info:
            remote.search("capital", 9)
        assert not isinstance(info.value, TransportError)  # a bad request is not retried later


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_searchr1_source_against_a_closed_port_names_the_url():
    port = _closed_port()
    source = SearchR1Source("remote", f"http://127.0.0.1:{port}", timeout_s=2, retries=1)
    expected = rf"127\.0\.0\.1:{port}/retrieve: cannot connect after 2 attempts"
    with pytest.raises(RetrievalUnavailableError, match=expected):
        source.search("anything", 3)
    # the runner records an unreachable retriever as an incomplete execution, retried by a rerun
    assert issubclass(RetrievalUnavailableError, TransportError)
    assert issubclass(RetrievalUnavailableError, BranchpointError)


def _mocked(handler, retries: int = 2) -> SearchR1Source:
    source = SearchR1Source("mock", "http://mock:9/", retries=retries)
    source._client = httpx.Client(transport=httpx.MockTransport(handler))
    return source


def test_searchr1_source_retries_5xx_then_parses_lenient_documents():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if len(calls) == 1:
            return httpx.Response(503, json={"detail": "warming up"})
        return httpx.Response(
            200,
            json={
                "result": [
                    [
                        {"document": {"contents": '"No Id"\nSome text.'}, "score": 0.5},
                        {"document": {"id": 17, "title": "Split", "text": "Title and text apart."}, "score": 0.25},
                        {"id": "bare", "contents": "untitled text"},
                    ]
                ]
            },
        )

    docs = _mocked(handler).search("q", 5)
    assert len(calls) == 2 and calls[0] == {"queries": ["q"], "topk": 5, "return_scores": True}
    assert [(d.doc_id, d.title, d.text, d.score) for d in docs] == [
        (content_id('"No Id"\nSome text.'), "No Id", "Some text.", 0.5),
        ("17", "Split", "Title and text apart.", 0.25),
        ("bare", None, "untitled text", 0.0),
    ]
    assert content_id("x") == content_id("x") != content_id("y")


def test_searchr1_source_gives_up_on_persistent_5xx_and_rejects_bad_shapes():
    with pytest.raises(RetrievalUnavailableError, match="HTTP 500: boom after 2 attempts"):
        _mocked(lambda r: httpx.Response(500, json={"error": "boom"}), retries=1).search("q", 1)
    with pytest.raises(RetrievalServerError, match="one list per query"):
        _mocked(lambda r: httpx.Response(200, json={"result": []})).search("q", 1)
    with pytest.raises(RetrievalServerError, match='no "contents"'):
        _mocked(lambda r: httpx.Response(200, json={"result": [[{"document": {"id": "x"}}]]})).search("q", 1)
    with pytest.raises(RetrievalServerError, match="not JSON"):
        _mocked(lambda r: httpx.Response(200, text="<html>")).search("q", 1)


def test_retrieve_url_and_limits_validation():
    assert retrieve_url("http://h:8000") == "http://h:8000/retrieve"
    assert retrieve_url("http://h:8000/retrieve/") == "http://h:8000/retrieve"
    with pytest.raises(BranchpointError, match="expected http"):
        SearchR1Source("x", "h:8000")
    with pytest.raises(BranchpointError, match="default_topk"):
        ServerLimits(max_topk=2, default_topk=3)


def test_load_index_dir_and_serve_command(index, tmp_path):
    saved = index.save(tmp_path / "idx")
    assert len(load_index_dir(saved)) == 20
    missing = CliRunner().invoke(app, ["retrieval", "serve", "--index", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "index not found" in missing.output

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "branchpoint.cli",
        "retrieval",
        "serve",
        "--index",
        str(saved),
        "--port",
        "0",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline, line = time.monotonic() + 60, ""
        while "serving" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "serving 20 passages" in line, line
        base = line.split(" at ", 1)[1].split("/retrieve", 1)[0]
        for _ in range(100):  # uvicorn starts right after the banner
            try:
                response = post(base, json={"queries": ["capital of Australia"], "topk": 1, "return_scores": True})
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert response.json()["result"][0][0]["document"]["id"] == "demo-001"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
