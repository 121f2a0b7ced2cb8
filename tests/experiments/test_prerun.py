"""Identical conditions found before the run: the probe builds each condition's first requests
with the run's own code, without calling the model, and its fingerprints are the ones the run
then sends (checked against real runs of the simulated and the scripted model, every policy)."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.evaluation.conditions import condition_label
from branchpoint.evaluation.sameness import before_run_warnings, identical_conditions
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.prerun import Probe, probe_conditions
from branchpoint.models.request_fingerprint import RequestFingerprints
from branchpoint.models.request_log import current_execution, read_requests
from branchpoint.traces import ExecutionRecord, read_records

POLICIES = ["constrained", "native", "tagged", "no_search"]


def first_sent(run_dir) -> dict[str, str]:
    """Per execution, the fingerprint of the first request it logged (`--log-requests`), hashed
    by the run's own `RequestFingerprints`."""
    prints = RequestFingerprints()
    seen: dict[str, None] = {}
    for line in read_requests(run_dir / "requests.jsonl"):
        eid = line["execution_id"]
        if eid not in seen:
            seen[eid] = None
            current_execution.set(eid)
            prints.write(line["endpoint"], line["body"])
    return {eid: prints.pop(eid) for eid in seen}


def probed(probe: Probe, record: ExecutionRecord) -> str | None:
    """The probe's first-request fingerprint for a record's condition and question."""
    return probe.first[condition_label(record.condition)][probe.questions.index(record.question_id)]


def assert_probe_matches_run(probe: Probe, run_dir) -> int:
    """Every execution of a probed question: its first request as sent is the probe's; an
    execution that sent one request records the probe's fingerprint. Returns how many did."""
    records = [r for r in read_records(run_dir / "executions.jsonl") if r.question_id in probe.questions]
    sent = first_sent(run_dir)
    assert records and not probe.unprobed
    single = 0
    for r in records:
        assert probed(probe, r) == sent[r.execution_id], (r.condition, r.question_id)
        if len([s for s in r.steps if s.kind != "search"]) == 1:
            single += 1
            assert r.request_fingerprint == probed(probe, r), (r.condition, r.question_id)
    return single


def sim_spec(sweep: dict, **agent) -> dict:
    return {
        "name": "prerun",
        "questions": {"path": "demo", "limit": 3},
        "model": {
            "provider": "sim",
            "name": "branchpoint-sim-instruct",
            "style": "chat",
            "temperature": 0.6,
            "max_tokens": 128,
            "sim": {"latency_scale": 0.0},
        },
        "agent": {"search_cap": 1, **agent},
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
        "sweep": sweep,
    }


def test_sim_probe_equals_what_every_policy_sends(tmp_path, isolated_cache):
    spec_path = tmp_path / "spec.yaml"
    sweep = {
        "agent.policy": POLICIES,
        "agent.prompt": ["plain", "self_eval"],
        "model.reasoning_effort": ["low", "high"],
    }
    spec_path.write_text(yaml.safe_dump(sim_spec(sweep)))
    spec = load_spec(spec_path)
    probe = probe_conditions(spec)
    # before the run: the completion-style policy ignores both the prompt variant and the
    # reasoning effort (a chat-only setting); every chat policy reads both
    assert [g["conditions"] for g in probe.groups] == [
        [label for label in sorted(probe.first) if "agent.policy=constrained" in label]
    ]
    assert set(probe.groups[0]["axes"]) == {"agent.prompt", "model.reasoning_effort"}
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, log_requests=True)
    assert assert_probe_matches_run(probe, run_dir) > 0
    # and the run's own check (whole executions) agrees
    after = identical_conditions(read_records(run_dir / "executions.jsonl"))
    assert [g["conditions"] for g in after] == [g["conditions"] for g in probe.groups]


def test_sim_probe_of_the_searchr1_protocol_across_search_caps(tmp_path, isolated_cache):
    # tagged under searchr1 continues the assistant's sequence (vLLM's continue_final_message and
    # include_stop_str_in_output, fields that follow the server kind). Its first request is the same
    # for both caps, but the cap acts only after a search: not reported
    spec_path = tmp_path / "spec.yaml"
    sweep = {"agent.protocol": ["chat", "searchr1"], "agent.search_cap": [1, 2]}
    spec_path.write_text(yaml.safe_dump(sim_spec(sweep, policy="tagged")))
    spec = load_spec(spec_path)
    probe = probe_conditions(spec)
    first = {label: tuple(v) for label, v in probe.first.items()}
    assert first["agent.protocol=searchr1,agent.search_cap=1"] == first["agent.protocol=searchr1,agent.search_cap=2"]
    assert len(set(first.values())) == 2 and probe.groups == []
    run_dir = tmp_path / "run"
    run_experiment(spec, run_dir, progress=False, log_requests=True)
    assert_probe_matches_run(probe, run_dir)
    bodies = [line["body"] for line in read_requests(run_dir / "requests.jsonl")]
    assert any(b.get("continue_final_message") for b in bodies)  # the server-kind fields were exercised


def scripted_spec(policy: str, reply: str, sweep: dict) -> dict:
    return {
        "name": "prerun",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
        "model": {"provider": "scripted", "script": [reply], "max_tokens": 32},
        "agent": {"policy": policy, "search_cap": 2},
        "sweep": sweep,
    }


def test_scripted_probe_equals_the_recorded_fingerprints(tmp_path, isolated_cache):
    # the scripted model answers at once: each execution sends one request, so its recorded
    # fingerprint is the probe's, for every policy
    for policy, reply in [
        ("constrained", 'answer", "text": "Paris"}'),
        *((p, "<answer>Paris</answer>") for p in POLICIES[1:]),
    ]:
        spec_path = tmp_path / f"{policy}.yaml"
        sweep = {"agent.prompt": ["plain", "fewshot"], "model.temperature": [0.0, 0.7]}
        spec_path.write_text(yaml.safe_dump(scripted_spec(policy, reply, sweep)))
        spec = load_spec(spec_path)
        probe = probe_conditions(spec)
        run_dir = tmp_path / policy
        run_experiment(spec, run_dir, progress=False, log_requests=True)
        assert assert_probe_matches_run(probe, run_dir) == 4 * len(probe.questions)
        after = identical_conditions(read_records(run_dir / "executions.jsonl"))
        assert [g["conditions"] for g in after] == [g["conditions"] for g in probe.groups]
        # the scripted model sends no temperature; only the completion policy ignores the prompt
        axes = [set(g["axes"]) for g in probe.groups]
        assert axes == (
            [{"agent.prompt", "model.temperature"}] if policy == "constrained" else [{"model.temperature"}] * 2
        )


def test_settings_that_act_after_the_first_request_are_not_reported(tmp_path, isolated_cache):
    # the first requests of these conditions are equal (the cap, top-k and evidence words show
    # only after a search, the seed only in the replies), yet the conditions differ
    sweep = {"agent.search_cap": [1, 3], "agent.top_k": [2, 4], "agent.evidence_words": [20, 60], "model.seed": [0, 1]}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(scripted_spec("constrained", 'answer", "text": "x"}', sweep)))
    probe = probe_conditions(load_spec(spec_path))
    assert len(set(map(tuple, probe.first.values()))) == 1  # one first request for all 16
    assert probe.groups == []


def test_the_same_settings_are_reported_where_the_condition_cannot_search(tmp_path, isolated_cache):
    sweep = {"agent.top_k": [2, 4], "agent.evidence_words": [20, 60]}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(scripted_spec("no_search", "Paris", sweep)))
    probe = probe_conditions(load_spec(spec_path))
    assert [set(g["axes"]) for g in probe.groups] == [{"agent.top_k", "agent.evidence_words"}]
    assert probe.groups[0]["context"] == {"agent.policy": "no_search", "model.provider": "scripted"}


def test_run_warns_before_any_execution_and_strict_refuses(tmp_path, isolated_cache):
    spec_path = tmp_path / "spec.yaml"
    sweep = {"agent.prompt": ["plain", "fewshot"], "model.reasoning_effort": ["low", "high"]}
    spec_path.write_text(yaml.safe_dump(scripted_spec("constrained", 'answer", "text": "x"}', sweep)))
    runner = CliRunner()
    refused = tmp_path / "refused"
    result = runner.invoke(app, ["run", str(spec_path), "--out", str(refused), "--no-progress", "--strict-conditions"])
    assert result.exit_code == 2, result.output
    assert "IDENTICAL CONDITIONS (before the run)" in result.output and not refused.exists()  # nothing ran
    result = runner.invoke(app, ["run", str(spec_path), "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    before = out.index("IDENTICAL CONDITIONS (before the run): agent.prompt = fewshot, plain; model.reasoning_effort")
    assert before < out.index(" planned, ")  # the summary line comes after the run
    assert "do not reach the model with agent.policy=constrained, model.provider=scripted" in out
    assert "IDENTICAL CONDITIONS: agent.prompt" in out  # the after-run check, as before


def test_a_sweep_whose_conditions_differ_gets_no_warning(tmp_path, isolated_cache):
    spec_path = tmp_path / "spec.yaml"
    sweep = {"agent.prompt": ["plain", "fewshot"], "agent.search": [True, False]}
    spec_path.write_text(yaml.safe_dump(scripted_spec("native", "<answer>x</answer>", sweep)))
    result = CliRunner().invoke(app, ["run", str(spec_path), "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "IDENTICAL CONDITIONS" not in result.output


def test_warning_names_every_condition_and_the_ignored_setting():
    group = {
        "conditions": ["model.reasoning_effort=high", "model.reasoning_effort=low"],
        "axes": {"model.reasoning_effort": ["high", "low"]},
        "fixed": {},
        "questions": 3,
        "context": {"agent.policy": "constrained", "model.provider": "sim"},
    }
    (line,) = before_run_warnings([group])
    assert line.startswith("IDENTICAL CONDITIONS (before the run): model.reasoning_effort = high, low would send")
    assert "model.reasoning_effort does not reach the model with agent.policy=constrained, model.provider=sim" in line
    assert line.endswith("model.reasoning_effort=high; model.reasoning_effort=low")
