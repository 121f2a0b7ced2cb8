"""`run.epochs`: K independent executions per question and condition, each with its own id and
recorded seed, refused at temperature 0, resumable, sharded like any other execution; a spec
that leaves the section keeps its ids and its dump."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from branchpoint.errors import InputError
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.planning import plan_executions, select_questions
from branchpoint.experiments.process_executor import run_experiment_processes
from branchpoint.experiments.spec import ExperimentSpec, RunSpec, condition_fingerprint, spec_fingerprint
from branchpoint.traces import execution_id, read_records

SCRIPTED = {
    "name": "epochs",
    "questions": {"path": "demo", "limit": 3},
    "model": {"provider": "scripted", "script": ['answer", "text": "Canberra"}'], "max_tokens": 32, "seed": 7},
    "agent": {"policy": "constrained", "search": False},
    "sweep": {"agent.evidence_words": [40, 60]},
}


def _write(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _with(**sections) -> dict:
    data = {**SCRIPTED, **sections}
    data["model"] = {**SCRIPTED["model"], **sections.get("model", {})}
    return data


def test_epochs_at_temperature_zero_are_refused_naming_the_field(tmp_path):
    path = _write(tmp_path, _with(run={"epochs": 3}))  # model.temperature defaults to 0
    with pytest.raises(InputError) as err:
        load_spec(path)
    msg = str(err.value)
    assert str(path) in msg and 'field "run.epochs"' in msg
    assert "run.epochs 3 at model.temperature 0" in msg and "copy of the first draw" in msg
    # the same rule for specs built in code, and per condition of a temperature sweep
    spec = ExperimentSpec.model_validate(
        _with(run={"epochs": 2}, model={"temperature": 0.7}, sweep={"model.temperature": [0.7, 0.0]})
    )
    with pytest.raises(InputError, match=r"run\.epochs.*sweep condition \{'model\.temperature': 0\.0\}"):
        plan_executions(spec, select_questions(spec))
    # sampled, or identical draws asked for: accepted
    load_spec(_write(tmp_path, _with(run={"epochs": 3}, model={"temperature": 0.7}), "sampled.yaml"))
    load_spec(_write(tmp_path, _with(run={"epochs": 3, "allow_identical_epochs": True}), "same.yaml"))


def test_run_is_not_a_sweep_axis_and_bad_values_name_the_field(tmp_path):
    with pytest.raises(InputError, match=r'"sweep\.run\.epochs": the run section is not a sweep axis'):
        load_spec(_write(tmp_path, _with(model={"temperature": 0.7}, sweep={"run.epochs": [1, 2]})))
    with pytest.raises(InputError, match=r"run\.epochs"):
        load_spec(_write(tmp_path, _with(run={"epochs": 0}), "zero.yaml"))
    with pytest.raises(InputError, match=r"run\.epoch"):
        load_spec(_write(tmp_path, _with(run={"epoch": 2}), "typo.yaml"))


def test_one_epoch_keeps_the_dump_ids_and_fingerprints_of_a_spec_without_the_section():
    plain = ExperimentSpec.model_validate(SCRIPTED)
    one = ExperimentSpec.model_validate(_with(run={"epochs": 1}))
    assert "run" not in plain.model_dump() and "run" not in one.model_dump(mode="json")
    assert spec_fingerprint(one) == spec_fingerprint(plain)
    plan = plan_executions(one, select_questions(one))
    # the id formula of a run without epochs: run, condition (+ settings), question; repeat 0
    expected = [
        execution_id("epochs", {**p.condition, "_settings": condition_fingerprint(p.spec)}, p.question.id) for p in plan
    ]
    assert [p.execution_id for p in plan] == expected
    assert all(p.epoch == 0 and p.seed == 7 for p in plan)


def test_more_epochs_add_executions_with_their_own_ids_and_seeds():
    one = ExperimentSpec.model_validate(_with(model={"temperature": 0.7}))
    three = ExperimentSpec.model_validate(_with(model={"temperature": 0.7}, run={"epochs": 3}))
    assert spec_fingerprint(three) == spec_fingerprint(one)  # one run folder may grow its epochs
    plan1 = plan_executions(one, select_questions(one))
    plan3 = plan_executions(three, select_questions(three))
    assert len(plan3) == 3 * len(plan1) == 18
    assert [p.execution_id for p in plan3 if p.epoch == 0] == [p.execution_id for p in plan1]
    assert len({p.execution_id for p in plan3}) == 18
    for key in {(p.question.id, str(p.condition)) for p in plan3}:
        mine = [p for p in plan3 if (p.question.id, str(p.condition)) == key]
        assert sorted(p.epoch for p in mine) == [0, 1, 2]
        assert len({p.seed for p in mine}) == 3 and next(p.seed for p in mine if p.epoch == 0) == 7
    assert RunSpec(epochs=3).seed_of(None, 2) is None  # an unseeded model stays unseeded


def test_epochs_record_repeat_and_seed_as_sent_and_an_interrupted_run_resumes(tmp_path, isolated_cache):
    spec = load_spec(_write(tmp_path, _with(model={"temperature": 0.7}, run={"epochs": 3})))
    plan = plan_executions(spec, select_questions(spec))
    first = [p.execution_id for p in plan[::2]]  # the interrupted run recorded every other execution
    run_dir = tmp_path / "run"
    assert run_experiment(spec, run_dir, progress=False, execution_ids=first).ran == len(first)
    resumed = run_experiment(spec, run_dir, progress=False)
    assert (resumed.planned, resumed.skipped, resumed.ran) == (18, len(first), 18 - len(first))
    assert run_experiment(spec, run_dir, progress=False).ran == 0
    records = read_records(run_dir / "executions.jsonl")
    assert sorted(r.execution_id for r in records) == sorted(p.execution_id for p in plan)  # each once
    by_id = {p.execution_id: p for p in plan}
    for r in records:
        p = by_id[r.execution_id]
        assert r.repeat == p.epoch
        assert r.sampling is not None and r.sampling["seed"] == p.seed  # taken from the request sent
    assert yaml.safe_load((run_dir / "spec.yaml").read_text())["run"]["epochs"] == 3


def test_epochs_shard_over_processes(tmp_path, isolated_cache):
    spec = load_spec(_write(tmp_path, _with(model={"temperature": 0.7}, run={"epochs": 2})))
    summary = run_experiment_processes(spec, tmp_path / "run", processes=2, progress=False, concurrency=2)
    assert summary.ran == 12
    records = read_records(tmp_path / "run" / "executions.jsonl")
    plan = plan_executions(spec, select_questions(spec))
    assert sorted(r.execution_id for r in records) == sorted(p.execution_id for p in plan)
    assert sorted(r.repeat for r in records) == [0] * 6 + [1] * 6
