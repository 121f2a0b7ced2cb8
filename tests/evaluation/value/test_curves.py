"""Learning curves: folds are support-disjoint, samples nested, scores match a hand recomputation."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value import curves
from branchpoint.evaluation.value.fitted import compose_level_gain
from branchpoint.evaluation.value.forecasters import Forecast, grouped_folds
from tests.evaluation.value.helpers import make_states


def _states(n=48, seed=0):
    rng = np.random.default_rng(seed)
    p_t = rng.uniform(0.2, 0.3, n)
    gain = np.where(np.arange(n) % 2 == 0, 0.7, -0.2)
    think = [rng.binomial(1, p, 6) for p in p_t]
    search = [rng.binomial(1, np.clip(p + g, 0, 1), 6) for p, g in zip(p_t, gain)]
    st = make_states(
        think, search, strata=[["a", "b"][i % 2] for i in range(n)], components=[f"c{i // 2}" for i in range(n)]
    )
    st.features["public_prefix"] = np.stack([np.arange(n) % 2, rng.normal(size=n)], axis=1).astype(float)
    return st, p_t


def test_nested_orders_are_permutations_of_the_pool():
    rng = np.random.default_rng(0)
    pool = np.array([True, True, False, True])
    orders = curves.nested_orders(["q0", "q0", "q1", "q2"], pool, 3, rng)
    assert len(orders) == 3 and all(sorted(o) == ["q0", "q2"] for o in orders)


def test_curves_learn_an_informative_feature_and_report_bands():
    states, _p_t = _states()
    raw = {"noise": Forecast(np.full(len(states), 0.5), np.full(len(states), 0.5))}
    fams = curves.curve_families(states, raw)
    assert set(fams) == {"raw_poly:noise", "public_prefix"} and fams["raw_poly:noise"].shape == (48, 5)
    out = curves.learning_curves(states, fams, budgets=(6, 18, 500), samples=2, resamples=200)
    assert out["budgets"] == [6, 18] and out["budgets_left_out"] == [500] and out["outer_folds"] == 4
    prefix = out["families"]["public_prefix"]["by_budget"]
    for entry in prefix.values():
        lo, hi = entry["gain_r2_band"]
        assert lo <= hi and entry["brier_band"][0] <= entry["brier"] <= entry["brier_band"][1]
    # the parity feature carries the gain: skill grows with the budget and beats constant raw scores
    assert prefix["18"]["gain_r2"] > out["families"]["raw_poly:noise"]["by_budget"]["18"]["gain_r2"]
    assert out["families"]["raw_poly:noise"]["by_budget"]["18"]["mean_guard_share"] == 1.0
    assert out["families"]["public_prefix"]["largest_budget"]["budget"] == 18


def test_one_budget_by_hand_when_every_fit_is_the_mean():
    states, _ = _states()
    x = np.zeros((len(states), 1))  # no information: the guard (or any penalty) predicts the training mean
    out = curves.learning_curves(states, {"none": x}, budgets=(36,), samples=1, outer_folds=4)
    # budget 36 = the whole pool of every fold: each fold's fit is the stratum-weighted training mean
    fold = grouped_folds(states.component, 4, 0)
    from branchpoint.evaluation.value.scores import (
        balanced_mean,
        balanced_weights,
        gain_r2,
        gain_risk,
        gain_variance,
        theta_hat,
    )

    f_hat, l_hat = np.zeros(len(states)), np.zeros(len(states))
    level = 0.5 * (states.think.mean_y + states.search.mean_y)
    for j in range(4):
        train = fold != j
        w = balanced_weights(states.stratum[train])
        f_hat[fold == j] = np.sum(w * states.dbar[train])
        l_hat[fold == j] = np.sum(w * level[train])
    q_t, q_s = compose_level_gain(l_hat, f_hat)
    theta = theta_hat(states.think, states.search)
    risk = balanced_mean(gain_risk(q_s - q_t, states.dbar, theta), states.stratum)
    v = gain_variance(balanced_mean(theta, states.stratum), balanced_mean(states.dbar, states.stratum))
    assert out["families"]["none"]["by_budget"]["36"]["gain_r2"] == pytest.approx(gain_r2(risk, v))
