"""A key echoed in a 200 body (the model's own text quoting the Authorization header) reaches no
file and no output (issue 28): traces, judged.jsonl, checkpoints.sqlite, retrieval_cache.sqlite,
the viewer export, `checkpoints ls`. Redaction applies to every text that came from a server or
model, not only to error texts."""

from __future__ import annotations

import logging

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.datasets.questions import demo_corpus_path
from branchpoint.experiments import RunStore
from tests.servers.openai_fault_server import FaultConfig, FaultServer

runner = CliRunner()
SENTINEL = "sk-branchpoint-ECHOED-4b1d9e07aa"


def test_a_key_quoted_in_replies_is_stored_and_printed_nowhere(tmp_path, monkeypatch, caplog, capfd):
    monkeypatch.setenv("BP_ECHO_KEY", SENTINEL)
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    caplog.set_level(logging.DEBUG)
    config = FaultConfig(search_once=True, echo_key_in_reply=True)
    outputs = []
    with FaultServer(config) as server:
        spec = {
            "name": "echo-reply",
            "questions": {"path": "demo", "limit": 6},
            "model": {"provider": "openai", "base_url": server.base_url, "name": "m", "api_key_env": "BP_ECHO_KEY"},
            "agent": {"policy": "constrained", "search_cap": 1, "top_k": 2},
            "retrieval": {"default": "demo", "sources": {"demo": {"kind": "bm25", "corpus": str(demo_corpus_path())}}},
        }
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
        run_dir = tmp_path / "run"
        for args in (
            ["run", str(spec_path), "--out", str(run_dir), "--no-progress"],
            ["fork", str(run_dir), "--actions", "THINK", "--repeats", "1", "--no-progress"],
            ["evaluate", str(run_dir), "--bootstrap", "10"],
            ["checkpoints", "ls", str(run_dir), "--json"],
            ["checkpoints", "ls", str(run_dir)],
            ["view", str(run_dir), "--export", str(run_dir / "viewer")],
            ["runs", "verify", str(run_dir)],
        ):
            result = runner.invoke(app, args)
            outputs.append(result.output)
            assert result.exit_code == 0, (args, result.output)
    assert f"Bearer {SENTINEL}" in config.authorization, "the key was sent"
    records = RunStore(run_dir).records()
    assert records and all("Bearer ***" in (r.final_answer or "") for r in records)  # the echo, masked
    assert any("Bearer ***" in (s.query or "") for r in records for s in r.steps)  # the query too
    leaks = [p for p in run_dir.rglob("*") if p.is_file() and SENTINEL.encode() in p.read_bytes()]
    assert not leaks, leaks
    assert {"checkpoints.sqlite", "retrieval_cache.sqlite", "judged.jsonl"} <= {p.name for p in run_dir.iterdir()}
    captured = capfd.readouterr()
    assert not any(SENTINEL in out for out in [*outputs, captured.out, captured.err])
    assert SENTINEL not in caplog.text
