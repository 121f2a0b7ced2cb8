"""Brier and its exact split, the U-statistic θ̂, gain risk, gain variance and gain skill."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value.outcomes import RoleOutcomes
from branchpoint.evaluation.value.scores import (
    balanced_mean,
    brier_split,
    gain_r2,
    gain_risk,
    gain_variance,
    oracle_bound,
    theta_hat,
    unbiased_square,
    utility,
)
from tests.evaluation.value.helpers import make_states

# State 1: T = [1,0,0,0], S = [1,1,1,1], q = (0.5, 0.8). State 2: T = [1,1,1], S = [0,0], q = (0.6, 0.4).
HAND = make_states([[1, 0, 0, 0], [1, 1, 1]], [[1, 1, 1, 1], [0, 0]])
Q_T = np.array([0.5, 0.6])
Q_S = np.array([0.8, 0.4])


def test_hand_computed_state_scores():
    # θ̂_1 = p̂_S² + p̂_T² − 2 Ȳ_S Ȳ_T = (16 − 4)/12 + (1 − 1)/12 − 2·1·0.25 = 0.5
    # θ̂_2 = 0 + (9 − 3)/6 − 2·0·1 = 1
    theta = theta_hat(HAND.think, HAND.search)
    assert theta == pytest.approx([0.5, 1.0])
    # L_1 = f² − 2fΔ̄ + θ̂ = 0.09 − 2·0.3·0.75 + 0.5 = 0.14; L_2 = 0.04 − 2·(−0.2)(−1) + 1 = 0.64
    L = gain_risk(Q_S - Q_T, HAND.dbar, theta)
    assert pytest.approx([0.14, 0.64]) == L
    split = brier_split(Q_T, Q_S, HAND.think, HAND.search)
    # Brier_1 = ½[(0.25 + 3·0.25)/4 + 0.04] = 0.145; V̂_1 = ½[s_T² = 0.25, s_S² = 0] = 0.125
    assert split.brier == pytest.approx([0.145, 0.5 * (0.16 + 0.16)])
    assert split.variance == pytest.approx([0.125, 0.0])
    assert split.gain == pytest.approx(L / 4)
    # level_1 = ℓ² − 2ℓ·Ȳ_ℓ + ¼(p̂_T² + p̂_S² + 2Ȳ_TȲ_S) = 0.4225 − 0.8125 + 0.375 = −0.015
    assert split.level[0] == pytest.approx(-0.015)
    # state 2 is deterministic: level = (0.5 − 0.5)² = 0, gain = ¼(−0.2 − (−1))² = 0.16
    assert split.level[1] == pytest.approx(0.0) and split.gain[1] == pytest.approx(0.16)


def test_hand_computed_aggregates():
    theta = theta_hat(HAND.think, HAND.search)
    L = gain_risk(Q_S - Q_T, HAND.dbar, theta)
    mean_theta, mean_dbar, mean_L = theta.mean(), HAND.dbar.mean(), L.mean()
    v = gain_variance(mean_theta, mean_dbar)
    assert v == pytest.approx(0.75 - 0.125**2)  # 0.734375
    assert gain_r2(mean_L, v) == pytest.approx(1 - 0.39 / 0.734375)
    assert np.isnan(gain_r2(0.1, 0.0)) and np.isnan(gain_r2(0.1, -0.01))
    assert oracle_bound(np.abs(HAND.dbar).mean(), mean_dbar) == pytest.approx((0.875 - 0.125) / 2)
    assert utility(1.0, 500, 0.01) == pytest.approx(0.995)


def test_balanced_mean_weights_strata_equally():
    values = np.array([1.0, 2.0, 6.0])
    assert balanced_mean(values, np.array(["a", "a", "b"], dtype=object)) == pytest.approx((1.5 + 6.0) / 2)
    cols = np.array([[1.0, 0.0], [2.0, 0.0], [6.0, 1.0]])
    assert balanced_mean(cols, np.array(["a", "a", "b"], dtype=object)) == pytest.approx([3.75, 0.5])


def test_split_parts_sum_to_the_observed_brier_exactly():
    rng = np.random.default_rng(1)
    n = 300
    think = [rng.uniform(size=rng.integers(2, 7)) for _ in range(n)]  # bounded, non-binary rewards
    search = [rng.integers(0, 2, size=rng.integers(2, 7)).astype(float) for _ in range(n)]
    states = make_states(think, search)
    q_t, q_s = rng.uniform(size=n), rng.uniform(size=n)
    split = brier_split(q_t, q_s, states.think, states.search)
    observed = np.array(
        [0.5 * (np.mean((q_t[i] - think[i]) ** 2) + np.mean((q_s[i] - search[i]) ** 2)) for i in range(n)]
    )
    np.testing.assert_allclose(split.brier, observed, atol=1e-12)
    np.testing.assert_allclose(split.level + split.gain + split.variance, observed, atol=1e-12)


def _bernoulli_roles(rng, p, m, draws):
    sums = rng.binomial(m, p, size=draws).astype(float)
    out = RoleOutcomes.__new__(RoleOutcomes)  # aggregate-only view: what the formulas read
    out.m, out.sum_y, out.sum_y2 = np.full(draws, float(m)), sums, sums  # Y² = Y for 0/1 rewards
    out.mean_y = sums / m
    return out


def test_u_statistic_is_unbiased_and_the_plug_in_is_not():
    rng = np.random.default_rng(7)
    p_t, p_s, draws = 0.3, 0.7, 200_000
    think, search = _bernoulli_roles(rng, p_t, 3, draws), _bernoulli_roles(rng, p_s, 4, draws)
    theta = theta_hat(think, search)
    se = theta.std() / np.sqrt(draws)
    assert abs(theta.mean() - (p_s - p_t) ** 2) < 4 * se
    plug_in = (search.mean_y - think.mean_y) ** 2  # biased by Var(Ȳ_S) + Var(Ȳ_T) = 0.1225
    assert plug_in.mean() - (p_s - p_t) ** 2 > 0.1
    assert unbiased_square(search.sum_y, search.sum_y2, search.m).mean() == pytest.approx(p_s**2, abs=4 * se)


def test_u_statistic_is_unbiased_for_bounded_rewards():
    rng = np.random.default_rng(3)
    draws, m = 100_000, 3
    y_t = rng.beta(2, 5, size=(draws, m))  # mean 2/7
    y_s = rng.beta(5, 2, size=(draws, m))  # mean 5/7
    states_t = RoleOutcomes.__new__(RoleOutcomes)
    states_s = RoleOutcomes.__new__(RoleOutcomes)
    for out, y in ((states_t, y_t), (states_s, y_s)):
        out.m, out.sum_y, out.sum_y2, out.mean_y = np.full(draws, float(m)), y.sum(1), (y * y).sum(1), y.mean(1)
    theta = theta_hat(states_t, states_s)
    assert abs(theta.mean() - (3 / 7) ** 2) < 4 * theta.std() / np.sqrt(draws)


def test_perfect_forecaster_has_gain_skill_one_and_the_mean_forecaster_zero():
    rng = np.random.default_rng(11)
    n, m = 4000, 4
    p_t, p_s = rng.uniform(size=n), rng.uniform(size=n)
    think, search = _bernoulli_roles(rng, p_t, m, n), _bernoulli_roles(rng, p_s, m, n)
    theta = theta_hat(think, search)
    dbar = search.mean_y - think.mean_y
    v = gain_variance(theta.mean(), dbar.mean())
    assert v == pytest.approx(1 / 6, abs=0.02)  # Var(p_S − p_T) for independent uniforms
    for f, expected in ((p_s - p_t, 1.0), (np.full(n, 0.0), 0.0)):  # perfect; the true mean gain (0)
        L = gain_risk(f, dbar, theta)
        mc_error = 4 * L.std() / np.sqrt(n) / v
        assert abs(gain_r2(L.mean(), v) - expected) < mc_error + 0.02


def test_split_parts_are_unbiased_for_their_targets():
    rng = np.random.default_rng(5)
    draws, p_t, p_s, q_t, q_s = 200_000, 0.2, 0.9, 0.5, 0.6
    think, search = _bernoulli_roles(rng, p_t, 4, draws), _bernoulli_roles(rng, p_s, 3, draws)
    split = brier_split(np.full(draws, q_t), np.full(draws, q_s), think, search)
    targets = {
        "level": ((q_t + q_s) / 2 - (p_t + p_s) / 2) ** 2,
        "gain": 0.25 * ((q_s - q_t) - (p_s - p_t)) ** 2,
        "variance": 0.5 * (p_t * (1 - p_t) + p_s * (1 - p_s)),
    }
    for part, target in targets.items():
        values = getattr(split, part)
        assert abs(values.mean() - target) < 4 * values.std() / np.sqrt(draws), part


def test_oracle_range_from_theta_by_hand():
    from branchpoint.evaluation.value.scores import oracle_range

    # the study's Test-1632 moments: θ̂ = 0.0490, mean gain 0.0568 → [0, 0.0823]
    lo, hi = oracle_range(0.0490, 0.0568)
    assert lo == 0.0 and hi == pytest.approx((0.0490**0.5 - 0.0568) / 2) and round(hi, 4) == 0.0823
    lo, hi = oracle_range(0.25, -0.1)  # [(0.25 − 0.1)/2, (0.5 − 0.1)/2]
    assert (lo, hi) == pytest.approx((0.075, 0.2))
    assert oracle_range(-0.01, 0.0) == (0.0, 0.0)


def test_level_split_by_hand_adds_up_to_the_level_risk_difference():
    from branchpoint.evaluation.value.scores import level_risk, level_split
    from tests.evaluation.value.helpers import make_states

    # ℓ = (0.2, 0.8); ℓ̂* = (Ȳ_T + Ȳ_S)/2 = (0.1, 0.9); ℓ₀ = 0.4
    states = make_states(think=[[0, 0, 0, 0, 0], [1, 1, 1, 1, 0]], search=[[1, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    level = np.array([0.2, 0.8])
    target = 0.5 * (states.think.mean_y + states.search.mean_y)
    assert target == pytest.approx([0.1, 0.9])
    split = level_split(level.mean(), (level**2).mean(), (level * target).mean(), target.mean(), 0.4)
    # mean bias (0.5 − 0.5)² − (0.4 − 0.5)² = −0.01; variation (0.34 − 0.25) − 2(0.37 − 0.25) = −0.15
    assert split.mean_bias == pytest.approx(-0.01) and split.variation == pytest.approx(-0.15)
    diff = level_risk(level, states.think, states.search) - level_risk(np.full(2, 0.4), states.think, states.search)
    assert split.total == pytest.approx(diff.mean()) == pytest.approx(-0.16)
