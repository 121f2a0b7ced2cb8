"""Honest sweeps: conditions that sent the model identical requests are named, loudly, in the
run summary, `evaluate`'s table and the report."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.evaluation.sameness import identical_conditions, identical_warnings
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.models.request_fingerprint import RequestFingerprints
from branchpoint.models.request_log import current_execution
from branchpoint.traces import read_records
from tests.experiments.conftest import CountingOpener


def test_fingerprint_ignores_seeds_but_not_content_or_repeats():
    sink = RequestFingerprints()
    for eid, bodies in {
        "a": [{"prompt": "p", "seed": 1}, {"prompt": "q", "seed": 1}],
        "b": [{"prompt": "p", "seed": 9}, {"prompt": "q", "seed": 2}],
        "c": [{"prompt": "p", "seed": 1}, {"prompt": "q", "temperature": 0.7}],
        "d": [{"prompt": "p"}, {"prompt": "q"}, {"prompt": "q"}],  # the same prompt again is another call
    }.items():
        current_execution.set(eid)
        for body in bodies:
            sink.write("completions", body)
    a, b, c, d = sink.pop("a"), sink.pop("b"), sink.pop("c"), sink.pop("d")
    assert a == b and len({a, c, d}) == 3 and sink.pop("a") is None


def test_prompt_axis_the_policy_ignores_is_reported_by_run_evaluate_and_report(tmp_path, write_spec, isolated_cache):
    # the constrained (completion) policy ignores agent.prompt: plain and fewshot send the same requests
    spec = write_spec({"sweep": {"agent.prompt": ["plain", "fewshot"], "agent.search_cap": [1, 2]}})
    run_dir = tmp_path / "run"
    run_experiment(load_spec(spec), run_dir, progress=False, model_opener=CountingOpener())
    records = read_records(run_dir / "executions.jsonl")
    assert all(r.request_fingerprint for r in records)
    groups = identical_conditions(records)
    # the search cap reaches the model (the prompt shows it), the prompt variant does not: one
    # group per cap, each naming agent.prompt as the axis that changed nothing
    assert [g["fixed"] for g in groups] == [{"agent.search_cap": 1}, {"agent.search_cap": 2}]
    assert all(set(g["axes"]) == {"agent.prompt"} and g["questions"] == 6 for g in groups)
    g = groups[0]
    message = identical_warnings(groups)[0]
    assert message.startswith("IDENTICAL CONDITIONS: agent.prompt = fewshot, plain (with agent.search_cap=1)")

    runner = CliRunner()
    result = runner.invoke(app, ["evaluate", str(run_dir), "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    assert "IDENTICAL CONDITIONS" in result.output and "agent.prompt" in result.output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["identical_conditions"][0]["conditions"] == g["conditions"]
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    text = (run_dir / "report.md").read_text()
    assert "Warning: identical conditions" in text and "agent.prompt" in text


def test_axis_that_changes_requests_is_not_reported(tmp_path, write_spec, isolated_cache):
    spec = write_spec({"sweep": {"agent.search": [True, False]}})
    run_dir = tmp_path / "run"
    run_experiment(load_spec(spec), run_dir, progress=False, model_opener=CountingOpener())
    assert identical_conditions(read_records(run_dir / "executions.jsonl")) == []


def test_run_summary_names_identical_conditions(tmp_path, write_spec, isolated_cache):
    # the spec's own scripted model (provider scripted), through the real model opener
    spec = write_spec({"sweep": {"agent.prompt": ["plain", "self_eval"]}})
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "IDENTICAL CONDITIONS" in result.output and "agent.prompt = plain, self_eval" in result.output
