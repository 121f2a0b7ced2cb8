"""Repeats are independent draws: fork studies sample with a recorded seed per branch, refuse
copies posing as repeats, stay deterministic under concurrency, and share one judgment per
identical answer."""

from __future__ import annotations

import shutil

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.llm_judges import LLMJudge
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.models import ScriptedModel
from tests.experiments.conftest import CountingOpener, search_until_told_responder

SPEC = {
    "name": "repeats",
    "agent": {"policy": "constrained", "search_cap": 1, "top_k": 2},
    "questions": {"path": "demo", "categories": ["answerable"], "limit": 2},
    "model": {
        "provider": "scripted",
        "max_tokens": 32,
        "script": ['search", "text": "capital"}', 'answer", "text": "Canberra"}'],
    },
    "sweep": {},
}


def seeded_responder(prompt: str, request: dict | None = None) -> str:
    """Searches while it may; the forced answer depends on the request's seed (a sampled draw)."""
    request = request or {}
    if request.get("grammar") and "search" not in request["grammar"]:
        return f'answer", "text": "draw {(request.get("seed") or 0) % 3}"}}'
    return search_until_told_responder(prompt, request)


@pytest.fixture()
def run_dir(tmp_path, isolated_cache):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "run"
    run_experiment(load_spec(spec), out, progress=False)
    return out


def test_repeats_at_temperature_zero_are_refused_unless_allowed(run_dir):
    with pytest.raises(InputError, match=r"--repeats 4 at --temperature 0: .*copy of the first draw"):
        fork_run(run_dir, ForkPlan(repeats=4, temperature=0), progress=False)
    assert not (run_dir / "forks.jsonl").exists()
    result = CliRunner().invoke(app, ["fork", str(run_dir), "--repeats", "2", "--temperature", "0", "--no-progress"])
    assert result.exit_code == 2 and "--allow-identical-repeats" in result.output
    summary = fork_run(
        run_dir, ForkPlan(repeats=2, temperature=0, allow_identical_repeats=True, actions=["THINK"]), progress=False
    )
    assert summary.ran == summary.planned > 0
    fork_run(run_dir, ForkPlan(repeats=1, temperature=0, actions=["THINK"]), progress=False)  # one draw: fine


def test_each_branch_samples_with_its_own_recorded_seed(run_dir):
    opener = CountingOpener(responder=seeded_responder)
    fork_run(
        run_dir, ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=6), progress=False, model_opener=opener
    )
    branches = fork_records(run_dir)
    assert len(branches) == 2 * 6
    for rec in branches:
        assert rec.sampling["temperature"] == 0.6 and rec.sampling["top_p"] == 0.95
        assert rec.condition["fork.temperature"] == 0.6 and rec.condition["fork.top_p"] == 0.95
    seeds = [r.sampling["seed"] for r in branches]
    assert len(set(seeds)) == len(seeds)  # distinct per repeat and per state
    sent = [req for m in opener.models for req in m.requests]
    assert {req["seed"] for req in sent} == set(seeds) and {req["temperature"] for req in sent} == {0.6}
    # the seed reached the model: repeats of one state are different draws
    by_state: dict[str, set[str]] = {}
    for rec in branches:
        by_state.setdefault(rec.parent.checkpoint_id, set()).add(rec.final_answer)
    assert all(len(answers) > 1 for answers in by_state.values())
    # rerunning the same plan plans the same branches with the same seeds (nothing to run)
    again = fork_run(
        run_dir,
        ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=6),
        progress=False,
        model_opener=CountingOpener(responder=seeded_responder),
    )
    assert again.ran == 0 and again.skipped_done == 12


def _comparable(records):
    out = []
    for rec in sorted(records, key=lambda r: r.execution_id):
        data = rec.model_dump()
        data.pop("wall_s")
        data.pop("checkpoint_ids")
        data.pop("invocation")  # each study is its own invocation
        for step in data["steps"]:
            step.pop("latency_s")
        out.append(data)
    return out


def test_two_identical_fork_studies_give_identical_records_under_concurrency(run_dir, tmp_path):
    """The scripted model's list replies restart per branch, so concurrency cannot reorder them."""
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    plan = ForkPlan(actions=["THINK", "SEARCH"], repeats=3, concurrency=4)
    fork_run(run_dir, plan, progress=False)
    fork_run(copy, plan, progress=False)
    first, second = fork_records(run_dir), fork_records(copy)
    assert len(first) == len(second) > 8
    assert _comparable(first) == _comparable(second)


def test_identical_answers_among_repeats_share_one_judgment(run_dir):
    """The search-value study's rule: one LLM judgment per distinct question-answer pair."""
    fork_run(
        run_dir,
        ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=4),
        progress=False,
        model_opener=CountingOpener(responder=seeded_responder),
    )
    branches = fork_records(run_dir)
    distinct = {(r.question, r.final_answer) for r in branches}
    assert len(distinct) < len(branches)  # some repeats gave the same answer
    judge_model = ScriptedModel(responder=lambda prompt: "LABEL: INCORRECT")
    judge = LLMJudge(judge_model, evidence=False)
    judged = judge_records(branches, judge)
    assert judge_model.calls == len(distinct)
    labels = {}
    for rec in judged:
        label = next(j.label for j in rec.judgments if j.judge == judge.name)
        assert labels.setdefault((rec.question, rec.final_answer), label) == label


def test_a_fork_study_run_afresh_draws_the_same_seeds(tmp_path, isolated_cache):
    """Seeds come from the saved state's position, the action and the repeat, not from
    checkpoint ids (new on every run), so two fresh runs of one study draw the same numbers."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    seeds = []
    for name in ("a", "b"):
        out = tmp_path / name
        run_experiment(load_spec(spec), out, progress=False)
        fork_run(out, ForkPlan(actions=["THINK", "SEARCH"], repeats=2), progress=False)
        seeds.append(
            sorted(
                (r.parent.boundary, r.branch, r.repeat, r.question_id, r.sampling["seed"]) for r in fork_records(out)
            )
        )
    assert seeds[0] == seeds[1] and len({s[-1] for s in seeds[0]}) == len(seeds[0])
