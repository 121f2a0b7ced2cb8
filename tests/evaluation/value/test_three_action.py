"""STOP / SAME / SWITCH at a pending query: outcome error, two-action gain loss, utilities."""

from __future__ import annotations

import json

import numpy as np
import pytest

from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.study import value_study
from branchpoint.evaluation.value.three_action import outcome_error, sample_informed_three, two_action_gain_loss
from branchpoint.traces import write_records
from tests.evaluation.value.helpers import fork_record, role


def test_scores_by_hand():
    stop, same, switch = role([[1, 0]]), role([[1, 1]]), role([[0, 0, 1, 1]])
    q = (np.array([0.5]), np.array([1.0]), np.array([0.5]))
    # outcome: STOP mean (0.25, 0.25) = 0.25; SAME 0; SWITCH 0.25 → 0.5/3
    assert outcome_error(q, (stop, same, switch)) == pytest.approx([0.5 / 3])
    # SAME − STOP: f = 0.5, Δ̄ = 0.5, θ̂ = 1 + 0 − 2·1·0.5 = 0 → L = 0.25 − 0.5 + 0 = −0.25
    # SWITCH − STOP: f = 0; θ̂ = Σ_{i≠j} over SWITCH (4 − 2)/(4·3) + STOP (1 − 1)/2 − 2·0.5·0.5 = −1/3 → L = −1/3
    theta_switch = (2 * 1 * 1) / (4 * 3) + 0.0 - 2 * 0.5 * 0.5
    assert two_action_gain_loss(q, (stop, same, switch)) == pytest.approx([0.5 * (-0.25 + theta_switch)])


def test_sample_informed_three_by_hand():
    # m = 2: each action one selection draw and one evaluation draw (2 splits each, 8 combinations)
    stop, same, switch = role([[1, 0]]), role([[0, 0]]), role([[1, 1]])
    # SWITCH's selection draw is always 1; STOP ties it (1) on its split (0 | 1) → STOP (first), scored 0;
    # otherwise SWITCH, scored 1. STOP split (sel 0, eval 1) loses → 4 combos → 1; (sel 1, eval 0) → 0.
    assert sample_informed_three((stop, same, switch), 0.0) == pytest.approx([0.5])


def test_three_action_block_in_value_json(tmp_path):
    rng = np.random.default_rng(0)
    recs = []
    for q in range(10):
        for action, p in (("STOP", 0.3), ("SEARCH", 0.6), ("SWITCH", 0.5)):
            for rep in range(4):
                recs.append(
                    fork_record(
                        f"p{q}",
                        "c",
                        action,
                        rep,
                        boundary="pending_query",
                        stratum="s",
                        support_group=f"page{q}",
                        answer=f"a{rep}",
                        label="CORRECT" if rng.uniform() < p else "INCORRECT",
                    )
                )
    run = tmp_path / "run"
    write_records(run / "forks.jsonl", recs)
    report = value_study(run, config=ValueConfig(judge="given", resamples=100, dev_split=0.3), write=False)
    block = report["three_action"]
    assert block["states"]["dev"] + block["states"]["test"] == 10
    assert set(block["forecasts"]) == {"action_means", "zero_gain"}
    assert set(block["utility"]["0"]) == {
        "always_stop",
        "always_same",
        "always_switch",
        "best_constant",
        "sample_informed",
    }
    assert block["utility"]["0"]["always_stop"]["value"] == pytest.approx(
        report["utility"]["by_price"]["0"]["always_think"]["utility"]
    )
    assert block["forecasts"]["action_means"]["gain_loss"]["interval"] is not None
    from branchpoint.evaluation.value.markdown import value_markdown

    assert "### STOP / SAME / SWITCH at pending queries" in value_markdown(report)


def _pending_run(tmp_path, outcomes):
    """A fork study whose pending states p0, p1, … have the given STOP / SEARCH / SWITCH labels."""
    recs = []
    for q, per_action in enumerate(outcomes):
        for action, ys in per_action.items():
            for rep, y in enumerate(ys):
                recs.append(
                    fork_record(
                        f"p{q}",
                        "c",
                        action,
                        rep,
                        boundary="pending_query",
                        stratum="s",
                        support_group=f"page{q}",
                        answer=f"a{rep}{y}",
                        label="CORRECT" if y else "INCORRECT",
                    )
                )
    run = tmp_path / "run"
    write_records(run / "forks.jsonl", recs)
    return run


def test_three_action_forecasts_file_scored_by_hand(tmp_path):
    # p0: STOP [1,0], SAME [1,1], SWITCH [0,0];  p1: STOP [0,0], SAME [1,0], SWITCH [1,1]
    run = _pending_run(
        tmp_path,
        [{"STOP": [1, 0], "SEARCH": [1, 1], "SWITCH": [0, 0]}, {"STOP": [0, 0], "SEARCH": [1, 0], "SWITCH": [1, 1]}],
    )
    lines = [
        {"parent_execution_id": "p0", "checkpoint_id": "c", "q_stop": 0.5, "q_same": 0.9, "q_switch": 0.1},
        {"parent_execution_id": "p1", "checkpoint_id": "c", "q_stop": 0.2, "q_same": 0.6, "q_switch": 0.8},
        {"parent_execution_id": "nope", "checkpoint_id": "c", "q_stop": 0.2, "q_same": 0.6, "q_switch": 0.8},
    ]
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    report = value_study(
        run, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), forecast_files=[path], write=False
    )
    block = report["three_action"]["forecasts"]["file:three"]
    # outcome error per state = ⅓ Σ_a (q_a² − 2 q_a Ȳ_a + ΣY²/m):
    #   p0: ⅓[(0.25 − 0.5 + 0.5) + (0.81 − 1.8 + 1) + 0.01] = 0.27/3 = 0.09
    #   p1: ⅓[0.04 + (0.36 − 0.6 + 0.5) + (0.64 − 1.6 + 1)] = 0.34/3
    assert block["outcome_error"]["value"] == pytest.approx((0.09 + 0.34 / 3) / 2)
    # gain loss = ½[L(q_same − q_stop) + L(q_switch − q_stop)], L = f² − 2fΔ̄ + θ̂:
    #   p0: SAME f=0.4, Δ̄=0.5, θ̂=1+0−1=0 → −0.24; SWITCH f=−0.4, Δ̄=−0.5, θ̂=0 → −0.24; → −0.24
    #   p1: SAME f=0.4, Δ̄=0.5, θ̂=0 → −0.24; SWITCH f=0.6, Δ̄=1, θ̂=1 → 0.36 − 1.2 + 1 = 0.16; → −0.04
    assert block["gain_loss"]["value"] == pytest.approx((-0.24 - 0.04) / 2)
    info = report["three_action"]["forecast_files"]["file:three"]
    assert (info["n_lines"], info["n_unknown"], info["n_missing"]) == (3, 1, 0)
    assert "file:three" not in report["brier"]  # not read as a two-action file
    from branchpoint.evaluation.value.markdown import value_markdown

    assert "`file:three`" in value_markdown(report)


def test_three_action_forecasts_file_errors_and_missing_states(tmp_path):
    from branchpoint.errors import InputError

    run = _pending_run(
        tmp_path,
        [{"STOP": [1, 0], "SEARCH": [1, 1], "SWITCH": [0, 0]}, {"STOP": [0, 0], "SEARCH": [1, 0], "SWITCH": [1, 1]}],
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"parent_execution_id": "p0", "checkpoint_id": "c", "q_stop": 0.5, "q_same": 1.5, "q_switch": 0.1})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r'bad\.jsonl line 1: field "q_same" must be a number in \[0, 1\]'):
        value_study(
            run, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), forecast_files=[bad], write=False
        )
    bad.write_text(
        json.dumps({"parent_execution_id": "p0", "checkpoint_id": "c", "q_stop": 0.5}) + "\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match=r'bad\.jsonl line 1: field "q_same" missing'):
        value_study(
            run, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), forecast_files=[bad], write=False
        )
    # p1 absent: 0.5 for every action there, counted
    one = tmp_path / "one.jsonl"
    one.write_text(
        json.dumps({"parent_execution_id": "p0", "checkpoint_id": "c", "q_stop": 0.5, "q_same": 0.9, "q_switch": 0.1})
        + "\n",
        encoding="utf-8",
    )
    report = value_study(
        run, config=ValueConfig(judge="given", resamples=0, dev_split=0.0), forecast_files=[one], write=False
    )
    assert report["three_action"]["forecast_files"]["file:one"]["n_missing"] == 1
    # p1 at 0.5 everywhere: ⅓[0.25 + (0.25 − 0.5 + 0.5) + (0.25 − 1 + 1)] = 0.25
    assert report["three_action"]["forecasts"]["file:one"]["outcome_error"]["value"] == pytest.approx((0.09 + 0.25) / 2)
