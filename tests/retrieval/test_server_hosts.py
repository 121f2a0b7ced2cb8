"""`retrieval serve` closed to other pages (issue 28): only requests whose Host is a loopback
name, the bound address or an `--allow-host` name are answered (403 otherwise)."""

from __future__ import annotations

from starlette.testclient import TestClient

from branchpoint.datasets.questions import demo_corpus_path
from branchpoint.retrieval import DenseIndex, load_corpus
from branchpoint.retrieval.server import RetrievalService, allowed_hosts_for, create_app


def test_the_retrieval_server_answers_only_the_names_it_is_bound_to(minilm):
    service = RetrievalService(DenseIndex.build(load_corpus(demo_corpus_path())[:5], minilm))
    local = TestClient(create_app(service), base_url="http://127.0.0.1:8000")
    assert local.get("/health").status_code == 200
    assert local.post("/retrieve", json={"queries": ["capital"], "topk": 1}).status_code == 200
    for host in ("attacker.example:8000", "attacker.example"):
        refused = local.post("/retrieve", json={"queries": ["capital"]}, headers={"Host": host})
        assert refused.status_code == 403 and "not allowed" in refused.text
    assert allowed_hosts_for("127.0.0.1") == ["127.0.0.1", "localhost", "[::1]"]
    assert "10.0.0.5" in allowed_hosts_for("10.0.0.5") and "10.0.0.5" not in allowed_hosts_for("0.0.0.0")
    cluster = TestClient(create_app(service, allowed_hosts=allowed_hosts_for("0.0.0.0", ["node3"])))
    assert cluster.get("/health", headers={"Host": "node3:8000"}).status_code == 200
    assert cluster.get("/health", headers={"Host": "other:8000"}).status_code == 403
    anyone = TestClient(create_app(service, allowed_hosts=["*"]))
    assert anyone.get("/health", headers={"Host": "other:8000"}).status_code == 200
