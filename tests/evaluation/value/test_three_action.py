"""STOP / SAME / SWITCH at a pending query: outcome error, two-action gain loss, utilities."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value.study import ValueConfig, value_study
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
                recs.append(fork_record(f"p{q}", "c", action, rep, boundary="pending_query", stratum="s",
                                        support_group=f"page{q}", answer=f"a{rep}",
                                        label="CORRECT" if rng.uniform() < p else "INCORRECT"))
    run = tmp_path / "run"
    write_records(run / "forks.jsonl", recs)
    report = value_study(run, config=ValueConfig(judge="given", resamples=100, dev_split=0.3), write=False)
    block = report["three_action"]
    assert block["states"]["dev"] + block["states"]["test"] == 10
    assert set(block["forecasts"]) == {"action_means", "zero_gain"}
    assert set(block["utility"]["0"]) == {"always_stop", "always_same", "always_switch", "best_constant",
                                          "sample_informed"}
    assert block["utility"]["0"]["always_stop"]["value"] == pytest.approx(
        report["utility"]["by_price"]["0"]["always_think"]["utility"])
    assert block["forecasts"]["action_means"]["gain_loss"]["interval"] is not None
    from branchpoint.evaluation.value.markdown import value_markdown

    assert "### STOP / SAME / SWITCH at pending queries" in value_markdown(report)
