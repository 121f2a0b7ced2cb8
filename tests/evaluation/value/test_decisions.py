"""Decision quality of the parents' own searches against need: a hand-built table whose
confusion counts and scores are worked out here, then a tiny fork study on the simulated model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.evaluation.value.decisions import decision_quality, parent_decision
from branchpoint.evaluation.value.value_file import DecisionQuality
from branchpoint.traces import ExecutionRecord, Step
from tests.evaluation.value.helpers import make_states


def parent(i: int, searches: int, *, forced: bool = False, condition=None, status: str = "ok") -> ExecutionRecord:
    steps = [Step(kind="search") for _ in range(searches)] + [Step(kind="forced_answer" if forced else "answer")]
    return ExecutionRecord(
        execution_id=f"p{i}",
        run_id="r",
        condition=condition or {},
        question_id=f"q{i}",
        question="?",
        answerable=True,
        status=status,
        search_calls=searches,
        steps=steps,
    )


#: state: (boundary, THINK rewards, SEARCH rewards, parent or None)
TABLE = [
    ("initial", [1, 1], [1, 1], parent(0, 1)),  # Δ = 0: not needed; searched → FP
    ("initial", [0, 0], [1, 1], parent(1, 2)),  # needed; searched → TP
    ("initial", [0, 0], [1, 0], parent(2, 0)),  # needed; answered → FN
    ("initial", [0, 0], [0, 0], parent(3, 0)),  # Δ = 0 (think_fails: needed); answered → TN (FN)
    ("after_search_1", [0, 0], [1, 1], parent(4, 1)),  # needed; answered after 1 → FN at step 1
    ("after_search_1", [1, 1], [1, 1], parent(5, 2)),  # not needed; searched again → FP at step 1
    ("after_search_2", [0, 0], [1, 1], parent(6, 2, forced=True)),  # the cap was spent: no decision
    ("initial", [0, 0], [1, 1], None),  # no parent record
    ("pending_query", [0, 0], [1, 1], parent(8, 1)),  # the search was decided already
    ("initial", [0, 0], [1, 1], parent(9, 0, condition={"agent.search": False})),  # search off
    ("initial", [0, 0], [1, 1], parent(10, 0, status="malformed")),  # stopped without a decision
]


def table_states():
    states = make_states([t for _, t, _, _ in TABLE], [s for _, _, s, _ in TABLE])
    states.boundary = [b for b, _, _, _ in TABLE]
    parents = {f"p{i}": p for i, (_, _, _, p) in enumerate(TABLE) if p is not None}
    return states, parents


def value(block, name):
    return block[name]["value"]


def test_counts_and_scores_on_a_hand_built_table():
    states, parents = table_states()
    dq = decision_quality(states, parents, np.ones(len(TABLE), dtype=bool), resamples=2000, seed=1)
    assert dq["available"] and dq["need_rule"] == "gain" and dq["n_states"] == 6
    assert dq["excluded"] == {"forced": 1, "no_parent": 1, "pending_query": 1, "search_off": 1, "no_decision": 1}
    a = dq["all"]
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (1, 2, 2, 1)
    assert value(a, "precision") == pytest.approx(1 / 3) and value(a, "recall") == pytest.approx(1 / 3)
    assert value(a, "f1") == pytest.approx(2 / 6)
    assert value(a, "over_search_rate") == pytest.approx(2 / 3) and value(a, "under_search_rate") == pytest.approx(
        2 / 3
    )
    s0, s1 = dq["by_step"]["0"], dq["by_step"]["1"]
    assert (s0["tp"], s0["fp"], s0["fn"], s0["tn"]) == (1, 1, 1, 1)
    assert all(value(s0, k) == pytest.approx(0.5) for k in ("precision", "recall", "f1", "over_search_rate"))
    assert (s1["tp"], s1["fp"], s1["fn"], s1["tn"]) == (0, 1, 1, 0)
    assert value(s1, "f1") == 0.0 and value(s1, "over_search_rate") == 1.0 and value(s1, "under_search_rate") == 1.0
    for block in (a, s0):
        for name in ("precision", "recall", "f1", "over_search_rate", "under_search_rate"):
            lo, hi = block[name]["interval"]
            assert lo <= value(block, name) <= hi and lo < hi
    assert DecisionQuality.model_validate(dq).all.f1.value == pytest.approx(1 / 3)  # value.json's model reads it


def test_the_think_fails_rule_and_the_test_rows():
    states, parents = table_states()
    rows = np.ones(len(TABLE), dtype=bool)
    dq = decision_quality(states, parents, rows, rule="think_fails", resamples=0)
    a = dq["all"]  # state 3 (THINK fails, SEARCH too) is now a need that was not searched
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (1, 2, 3, 0)
    assert a["over_search_rate"] == {"value": 1.0, "interval": None}
    rows[:2] = False  # states 0 and 1 are dev rows: left out
    b = decision_quality(states, parents, rows, resamples=0)["all"]
    assert (b["tp"], b["fp"], b["fn"], b["tn"]) == (0, 1, 2, 1)


def test_parent_decisions():
    assert parent_decision(parent(0, 3), 1) == "search"
    assert parent_decision(parent(0, 1), 1) == "answer"
    assert parent_decision(parent(0, 1, forced=True), 1) == "forced"
    assert parent_decision(parent(0, 0), 1) == "fewer_searches_than_state"
    assert parent_decision(parent(0, 0, condition={"agent.search_cap": 0}), 0) == "search_off"
    assert parent_decision(None, 0) == "no_parent"


def test_a_sim_fork_study_scores_its_decisions_in_value_json_and_markdown(tmp_path, isolated_cache):
    from branchpoint.cli import app
    from branchpoint.evaluation.value import ValueConfig
    from branchpoint.evaluation.value.markdown import value_markdown
    from branchpoint.evaluation.value.study import load_states
    from branchpoint.experiments import load_spec, run_experiment
    from branchpoint.experiments.forking import ForkPlan, fork_run

    spec = {
        "name": "decisions-sim",
        "questions": {"path": "demo", "sample": {"answerable": 3, "unanswerable": 3}},
        "model": {
            "provider": "sim",
            "name": "branchpoint-sim-instruct",
            "style": "chat",
            "max_tokens": 256,
            "seed": 2,
            "sim": {"latency_scale": 0.0},
        },
        "agent": {"policy": "native", "search_cap": 2, "top_k": 2},
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    run = tmp_path / "run"
    run_experiment(load_spec(path), run, progress=False, concurrency=8)
    plan = ForkPlan(boundaries=["initial"], actions=["THINK", "SEARCH"], repeats=2, search_budget=1, concurrency=8)
    fork_run(run, plan, progress=False)
    result = CliRunner().invoke(
        app, ["value", str(run), "--dev-split", "0", "--resamples", "200", "--no-progress"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "decision quality (" in result.output
    report = json.loads((run / "value.json").read_text())
    dq = report["decision_quality"]
    assert dq["available"], dq
    # recomputed here: need from the states' own repeats, decisions from executions.jsonl
    states, parents, _ = load_states(run, ValueConfig(dev_split=0))
    need = states.dbar > 0
    searched = np.array([parents[k[0]].search_calls > 0 for k in states.keys])
    assert set(states.boundary) == {"initial"} and dq["n_states"] == len(states)
    a = dq["all"]
    assert a["tp"] == int((need & searched).sum()) and a["fp"] == int((~need & searched).sum())
    assert a["fn"] == int((need & ~searched).sum()) and a["tn"] == int((~need & ~searched).sum())
    assert list(dq["by_step"]) == ["0"]
    md = value_markdown(report)
    assert "### Decision quality: searched vs needed" in md and "| all steps |" in md
