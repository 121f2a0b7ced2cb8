"""One execution's timeline (checkpoints placed on its steps) and a fork tree's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.views import (
    boundary_sequence,
    checkpoint_marks,
    execution_view,
    forecast_files,
    read_forecasts,
    tree_view,
)
from branchpoint.evaluation.wilson import wilson_interval
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, read_records


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(0, 4)
    assert lo == 0.0 and hi == pytest.approx(0.4899, abs=1e-4)
    lo, hi = wilson_interval(2, 4)
    assert (lo, hi) == (pytest.approx(0.1500, abs=1e-4), pytest.approx(0.8500, abs=1e-4))
    assert wilson_interval(0, 0) is None


def test_checkpoints_are_placed_at_their_boundaries(study_run: Path) -> None:
    index = RunIndex.open(study_run).build()
    parent = next(r for r in read_records(study_run / EXECUTIONS_FILE) if r.search_calls == 2)
    view = execution_view(index, parent.execution_id)
    marks = [(m["position"], m["boundary"], m["checkpoint_id"]) for m in view["checkpoints"]]
    kinds = [s["kind"] for s in view["steps"]]
    assert kinds == ["decide", "search", "decide", "search", "decide"]
    assert marks == list(
        zip(
            [0, 1, 2, 3, 4],
            ["initial", "pending_query", "after_search_1", "pending_query", "after_search_2"],
            parent.checkpoint_ids,
        )
    )
    assert view["checkpoint_note"] is None
    assert view["cost"]["total"] == index.entry(parent.execution_id).row["cost"]


def test_a_branch_starts_at_the_boundary_it_was_forked_at(study_run: Path) -> None:
    forks = read_records(study_run / FORKS_FILE)
    switch = next(f for f in forks if f.branch == "SWITCH" and f.search_calls == 2)
    assert [b for _, b in boundary_sequence(switch)] == [
        "pending_query",
        "after_search_1",
        "pending_query",
        "after_search_2",
    ]
    stop = next(f for f in forks if f.branch == "STOP")
    assert boundary_sequence(stop) == []  # STOP cancels the pending query: nothing is saved
    later = next(f for f in forks if f.parent.boundary == "after_search_1" and f.branch == "SEARCH")
    assert boundary_sequence(later)[0] == (0, "after_search_1")
    assert boundary_sequence(later)[-1][1] == f"after_search_{1 + later.search_calls}"


def test_ids_that_do_not_match_the_steps_are_listed_unplaced(study_run: Path) -> None:
    record = read_records(study_run / EXECUTIONS_FILE)[0].model_copy(update={"checkpoint_ids": ["a", "b"]})
    marks, note = checkpoint_marks(record, [])
    assert [m["position"] for m in marks] == [None, None] and "2 checkpoint ids" in note


def test_tree_has_rates_intervals_delta_and_forecasts(study_run: Path) -> None:
    index = RunIndex.open(study_run).build()
    forks = read_records(study_run / FORKS_FILE)
    parent_id = forks[0].parent.execution_id
    forecasts, problems = read_forecasts(forecast_files(index))
    assert not problems and forecasts
    tree = tree_view(index, parent_id, forecasts)
    mine = [f for f in forks if f.parent.execution_id == parent_id]
    assert {s["checkpoint_id"] for s in tree["states"]} == {f.parent.checkpoint_id for f in mine}
    judged = {r.execution_id: index.entry(r.execution_id).row["outcome"] for r in mine}
    for state in tree["states"]:
        for action, a in state["actions"].items():
            ids = [b["id"] for b in a["branches"]]
            wins = sum(judged[i] in ("correct_answer", "correct_abstention") for i in ids if i in judged)
            if action != "replay":
                assert a["rate"] == wins / len(ids) and a["interval"] == wilson_interval(wins, len(ids))
        t, s = state["actions"][state["t_action"]], state["actions"][state["s_action"]]
        assert state["delta"] == pytest.approx(s["rate"] - t["rate"])
        assert state["scored"] and state["forecasts"][0]["name"] == "file:forecasts"
    assert [s["boundary"] for s in tree["states"]] == ["initial", "pending_query", "after_search_1"]
    assert "replay" in tree["states"][0]["actions"]
    assert tree["value"]["gain_risk"]  # value.json's scores shown beside the tree


def test_lineage_of_a_branch_names_its_parent(study_run: Path) -> None:
    index = RunIndex.open(study_run).build()
    fork = read_records(study_run / FORKS_FILE)[0]
    view = execution_view(index, fork.execution_id)
    assert view["lineage"] == [
        {
            "id": fork.parent.execution_id,
            "checkpoint": fork.parent.checkpoint_id,
            "boundary": fork.parent.boundary,
            "branch": None,
            "known": True,
        }
    ]
    with pytest.raises(KeyError):
        execution_view(index, "nope")


def test_forecasts_per_state_are_values_own(study_run: Path, tmp_path: Path) -> None:
    import shutil

    import numpy as np

    from branchpoint.evaluation.value import ValueConfig, value_study
    from branchpoint.evaluation.value.outcomes import dev_split
    from branchpoint.evaluation.value.study import load_states
    from branchpoint.evaluation.viewer.views import state_forecasts

    run = tmp_path / "run"
    shutil.copytree(study_run, run)
    config = ValueConfig(resamples=0, dev_split=0.5)
    value_study(run, config=config, forecast_files=[run / "forecasts.jsonl"])
    index = RunIndex.open(run).build()
    per_state, problems = state_forecasts(index)
    assert not problems
    states, _, _ = load_states(run, config)
    dev = dev_split(states, 0.5, 0)
    assert dev.any() and not dev.all()
    mean_t = np.mean([states.think.mean_y[i] for i in np.flatnonzero(dev)])  # historical mean: dev rows' mean
    for i, key in enumerate(states.keys):
        names = {f["name"]: f for f in per_state[key]}
        assert {"historical_mean", "file:forecasts", "file:forecasts+ridge"} <= set(names)
        assert names["historical_mean"]["q_think"] == pytest.approx(mean_t) and names["historical_mean"]["dev"] == bool(
            dev[i]
        )
