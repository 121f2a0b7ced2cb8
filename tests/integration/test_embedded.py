"""The whole pipeline on the real embedded stack: llama.cpp server + packaged Gemma 3 270M GGUF,
MiniLM ONNX encoder, FAISS, SQLite checkpoints, trace, evaluation. Two demo questions."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.traces import read_records

pytestmark = pytest.mark.integration

SPEC = {
    "name": "integration",
    "questions": {"path": "demo", "sample": {"answerable": 1, "unanswerable": 1}},
    "model": {"provider": "embedded", "name": "gemma-3-270m", "style": "completion", "max_tokens": 24},
    "agent": {"policy": "constrained", "search_cap": 1, "top_k": 2, "evidence_words": 30},
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Run the spec once through the CLI on the real llama.cpp server."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: run `make install-embedded`")
    tmp = tmp_path_factory.mktemp("integration")
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    out = tmp / "run"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--no-progress", "--log-requests"])
    assert result.exit_code == 0, result.output
    return out


def test_every_execution_is_recorded_with_real_usage(run_dir):
    records = read_records(run_dir / "executions.jsonl")
    assert len(records) == 2
    assert {r.answerable for r in records} == {True, False}
    for r in records:
        assert r.status in ("ok", "malformed", "length")
        model_steps = [s for s in r.steps if s.usage is not None]
        assert model_steps, "no model call recorded"
        assert all(s.usage.input_tokens > 0 for s in model_steps)  # counted by the server
        assert r.input_tokens == sum(s.usage.input_tokens for s in model_steps)
        assert all(s.latency_s > 0 for s in model_steps)
        assert r.checkpoint_ids  # at least the initial boundary


def test_records_hold_the_sampling_the_llamacpp_server_was_sent(run_dir):
    from branchpoint.models.request_log import read_requests
    from branchpoint.models.sent_sampling import sampling_of

    last = {e["execution_id"]: e["body"] for e in read_requests(run_dir / "requests.jsonl")}
    for r in read_records(run_dir / "executions.jsonl"):
        assert r.sampling == sampling_of(last[r.execution_id])
        assert r.sampling["temperature"] == 0.0 and r.sampling["seed"] == 0  # the spec's, as sent


def test_searches_retrieve_from_the_demo_index(run_dir):
    records = read_records(run_dir / "executions.jsonl")
    searches = [s for r in records for s in r.steps if s.kind == "search"]
    for s in searches:
        assert s.source == "demo" and len(s.retrieved) == 2
        assert all(d.doc_id.startswith("demo-") for d in s.retrieved)
    assert sum(r.search_calls for r in records) == len(searches)


def test_server_log_and_checkpoints_exist(run_dir):
    assert (run_dir / "llamacpp-server.log").stat().st_size > 0
    result = CliRunner().invoke(app, ["checkpoints", "ls", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert {r["kind"] for r in rows} >= {"initial"}


def test_evaluation_of_the_real_run(run_dir):
    result = CliRunner().invoke(app, ["evaluate", str(run_dir)])
    assert result.exit_code == 0, result.output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 2
    assert metrics["n_answerable"] == 1 and metrics["n_unanswerable"] == 1
    assert 0.0 <= metrics["overall_accuracy"] <= 1.0


def test_rerun_makes_no_model_call(run_dir):
    spec = run_dir.parent / "spec.yaml"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(run_dir), "--no-progress"])
    assert result.exit_code == 0 and "2 already recorded, 0 run" in result.output
