"""The supervision-subset study (seed 002, Appendix D "Supervision subsets"): a forecaster fitted
on a historical study against the same fitted on k labelled target questions, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value import ValueConfig, value_study
from branchpoint.evaluation.value.study import load_states
from branchpoint.evaluation.value.supervision import outer_folds, state_brier
from tests.evaluation.value.test_three_pair_disjoint import _study

TARGET = {
    "t0": ("s", {"THINK": [1, 0], "SEARCH": [0, 0]}),
    "t1": ("s", {"THINK": [1, 1], "SEARCH": [0, 1]}),
    "t2": ("s", {"THINK": [0, 0], "SEARCH": [1, 1]}),
    "t3": ("s", {"THINK": [0, 1], "SEARCH": [1, 0]}),
}
HISTORY = {"hA": ("s", {"THINK": [1, 1], "SEARCH": [1, 1]}), "hB": ("s", {"THINK": [0, 0], "SEARCH": [1, 1]})}


def test_historical_minus_target_brier_by_hand(tmp_path):
    target = _study(tmp_path / "target", TARGET)
    history = _study(tmp_path / "history", HISTORY)
    config = ValueConfig(
        judge="given",
        resamples=0,
        dev_split=0.0,
        supervision_history=str(history),
        supervision_budgets=(1, 3, 5),
        supervision_samples=3,
    )
    report = value_study(target, config=config, write=False)
    block = report["supervision_subsets"]
    assert block["history"]["questions"] == 2 and block["outer_folds"] == 4
    assert block["budgets"] == [1, 3]  # 5 exceeds each fold's pool of 3 questions
    fam = block["families"]["historical_mean"]
    # history means (T .5, S 1) everywhere: t0 ½(.25 + 1), t1 ½(.25 + .5), t2 ½(.25 + 0), t3 ½(.25 + .5)
    assert fam["brier_historical"]["value"] == pytest.approx(0.375)
    # target-3: each fold's fit is the mean of the other three questions (every draw is the whole pool)
    states = load_states(target, config)[0]
    fold = outer_folds(states, 4, 0)
    q = np.zeros((len(states), 2))
    for f in range(4):
        pool = fold != f
        q[fold == f] = [states.think.mean_y[pool].mean(), states.search.mean_y[pool].mean()]
    expected = np.mean(
        [
            0.5 * (np.mean((q[i, 0] - states.think.y[i]) ** 2) + np.mean((q[i, 1] - states.search.y[i]) ** 2))
            for i in range(len(states))
        ]
    )
    entry = fam["by_budget"]["3"]
    assert entry["brier_target"]["value"] == pytest.approx(expected)
    assert entry["historical_minus_target"]["value"] == pytest.approx(0.375 - expected)
    assert entry["subset_variability"]["value"] == pytest.approx(0.0)  # one possible subset
    search_hist = np.mean([np.mean((1.0 - y) ** 2) for y in states.search.y])
    search_target = np.mean([np.mean((q[i, 1] - states.search.y[i]) ** 2) for i in range(len(states))])
    assert entry["search_only"]["value"] == pytest.approx(search_hist - search_target)
    # one question per fit: the three draws differ, and so do their predictions
    assert fam["by_budget"]["1"]["subset_variability"]["value"] > 0
    from branchpoint.evaluation.value.markdown import value_markdown

    assert "### Supervision subsets" in value_markdown(report)
    assert "public_prefix_ridge" in block["families"] or "public_prefix_ridge" in block["skipped_families"]


def test_subset_variability_is_the_quadratic_gap():
    # mean_s Brier(q_s) = Brier(mean_s q_s) + ½ Σ_a Var_s(q_a,s) at one state
    from tests.evaluation.value.helpers import make_states

    states = make_states([[1, 0, 1]], [[0, 0, 1]])
    fits = np.array([[0.2, 0.9], [0.6, 0.1], [0.7, 0.5]])
    per = [state_brier(np.array([t]), np.array([s]), states)[0][0] for t, s in fits]
    mean_fit = fits.mean(axis=0)
    gap = np.mean(per) - state_brier(np.array([mean_fit[0]]), np.array([mean_fit[1]]), states)[0][0]
    assert gap == pytest.approx(0.5 * fits.var(axis=0).sum())
