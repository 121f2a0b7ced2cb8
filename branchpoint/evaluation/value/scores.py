"""Search-value scores: each formula once, vectorised over states (or over bootstrap resamples).

Notation per state x (rewards in [0, 1], repeats independent given x):
  m_T, m_S repeats; Ȳ_T, Ȳ_S their means; p_T, p_S the true success rates; Δ = p_S − p_T the gain
  and Δ̄ = Ȳ_S − Ȳ_T its plug-in estimate; a forecast (q_T, q_S) with gain forecast f = q_S − q_T
  and success level ℓ = (q_T + q_S)/2, whose target is ℓ* = (p_T + p_S)/2.

The Brier score of a state splits exactly, in expectation over the repeats, into
  E[Brier] = (ℓ − ℓ*)² + ¼(f − Δ)² + V_x,   V_x = ½[Var(Y^T) + Var(Y^S)]
(Var = p(1 − p) for 0/1 rewards). The squares of unknowns are estimated without bias with
U-statistics (`unbiased_square`): Σ_{i≠j} Y_i Y_j / (m(m−1)) estimates p², because distinct
repeats are independent. With these estimators the three parts add up to the *observed* Brier
exactly, state by state (not only in expectation): see `brier_split`. Unbiased estimates of
squares can be negative on a single state; their means over many states are what to read.

Averages over states are stratum-balanced everywhere (`balanced_mean`): the mean of the
per-stratum means, the same functional the bootstrap recomputes in each resample.
"""

from __future__ import annotations

from typing import NamedTuple, cast, overload

import numpy as np

from branchpoint.evaluation.value.outcomes import RoleOutcomes


def unbiased_square(sum_y: np.ndarray, sum_y2: np.ndarray, m: np.ndarray) -> np.ndarray:
    """p̂² = Σ_{i≠j} Y_i Y_j / (m(m−1)) = ((ΣY)² − ΣY²) / (m(m−1)): unbiased for p² (m ≥ 2)."""
    return cast(np.ndarray, (sum_y * sum_y - sum_y2) / (m * (m - 1)))


def unbiased_variance(sum_y: np.ndarray, sum_y2: np.ndarray, m: np.ndarray) -> np.ndarray:
    """s² = Σ(Y − Ȳ)² / (m − 1) = ΣY²/m − p̂²: unbiased for Var(Y) (m ≥ 2)."""
    return cast(np.ndarray, sum_y2 / m - unbiased_square(sum_y, sum_y2, m))


def theta_hat(think: RoleOutcomes, search: RoleOutcomes) -> np.ndarray:
    """θ̂ = Σ_{i≠j} Y_i^S Y_j^S/(m_S(m_S−1)) + Σ_{i≠j} Y_i^T Y_j^T/(m_T(m_T−1)) − 2 Ȳ_S Ȳ_T.

    The Hoeffding U-statistic for Δ² = (p_S − p_T)²: unbiased because the T and S repeats are
    independent (E[Ȳ_S Ȳ_T] = p_S p_T) and each sum over distinct pairs is unbiased for p².
    """
    return cast(
        np.ndarray,
        unbiased_square(search.sum_y, search.sum_y2, search.m)
        + unbiased_square(think.sum_y, think.sum_y2, think.m)
        - 2.0 * search.mean_y * think.mean_y,
    )


def brier(q_think: np.ndarray, q_search: np.ndarray, think: RoleOutcomes, search: RoleOutcomes) -> np.ndarray:
    """Brier per state = ½[mean_i (q_T − Y_i^T)² + mean_j (q_S − Y_j^S)²]: the average over the
    two actions of the mean squared error against each repeated outcome.

    Expanded, mean_i (q − Y_i)² = q² − 2qȲ + ΣY²/m.
    """
    err_t = q_think**2 - 2 * q_think * think.mean_y + think.sum_y2 / think.m
    err_s = q_search**2 - 2 * q_search * search.mean_y + search.sum_y2 / search.m
    return cast(np.ndarray, 0.5 * (err_t + err_s))


def gain_risk(f: np.ndarray, dbar: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """L = f² − 2f(Ȳ_S − Ȳ_T) + θ̂: unbiased for the squared gain error (f − Δ)² (f fixed given x)."""
    return cast(np.ndarray, f * f - 2.0 * f * dbar + theta)


def level_risk(level: np.ndarray, think: RoleOutcomes, search: RoleOutcomes) -> np.ndarray:
    """(ℓ − ℓ*)² estimated without bias: ℓ² − 2ℓ(Ȳ_T + Ȳ_S)/2 + ¼(p̂_T² + p̂_S² + 2Ȳ_T Ȳ_S),
    the last term unbiased for ℓ*² = ¼(p_T + p_S)²."""
    target_sq = 0.25 * (
        unbiased_square(think.sum_y, think.sum_y2, think.m)
        + unbiased_square(search.sum_y, search.sum_y2, search.m)
        + 2.0 * think.mean_y * search.mean_y
    )
    return cast(np.ndarray, level * level - level * (think.mean_y + search.mean_y) + target_sq)


def outcome_variance(think: RoleOutcomes, search: RoleOutcomes) -> np.ndarray:
    """V̂_x = ½[s_T² + s_S²]: unbiased for V_x = ½[Var(Y^T) + Var(Y^S)] (p(1−p) for 0/1 rewards)."""
    return cast(
        np.ndarray,
        0.5
        * (
            unbiased_variance(think.sum_y, think.sum_y2, think.m)
            + unbiased_variance(search.sum_y, search.sum_y2, search.m)
        ),
    )


class BrierSplit(NamedTuple):
    """Per-state Brier and its three estimated parts; level + gain + variance == brier exactly."""

    brier: np.ndarray
    level: np.ndarray
    gain: np.ndarray
    variance: np.ndarray


def brier_split(q_think: np.ndarray, q_search: np.ndarray, think: RoleOutcomes, search: RoleOutcomes) -> BrierSplit:
    """Brier = (ℓ − ℓ*)² + ¼(f − Δ)² + V_x, each part estimated without bias per state.

    level = `level_risk`, gain = ¼·`gain_risk` (¼ L), variance = `outcome_variance`. The sum is
    the observed Brier exactly: per action, mean_i (q − Y_i)² = [q² − 2qȲ + p̂²] + [ΣY²/m − p̂²],
    the unbiased squared error plus s², and ½(a² + b²) = ((a + b)/2)² + ((b − a)/2)² splits the
    squared errors a = q_T − p_T, b = q_S − p_S into level and gain, the cross term ab estimated
    by (q_T − Ȳ_T)(q_S − Ȳ_S) (independent actions).
    """
    f = q_search - q_think
    theta = theta_hat(think, search)
    dbar = search.mean_y - think.mean_y
    return BrierSplit(
        brier=brier(q_think, q_search, think, search),
        level=level_risk(0.5 * (q_think + q_search), think, search),
        gain=0.25 * gain_risk(f, dbar, theta),
        variance=outcome_variance(think, search),
    )


def gain_variance(mean_theta: np.ndarray | float, mean_dbar: np.ndarray | float) -> np.ndarray | float:
    """V_Δ = mean θ̂ − (mean Δ̄)²: the spread of the gain over states (E[Δ²] − (EΔ)²)."""
    return mean_theta - mean_dbar * mean_dbar


def gain_r2(mean_gain_risk: np.ndarray | float, v_delta: np.ndarray | float) -> np.ndarray | float:
    """Gain skill R²_Δ = 1 − L/V_Δ (mean gain risk over gain variance); NaN where V_Δ ≤ 0.

    1 for a perfect gain forecast; 0 for forecasting the mean gain everywhere.
    """
    v = np.asarray(v_delta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(v > 0, 1.0 - np.asarray(mean_gain_risk, dtype=float) / np.where(v > 0, v, 1.0), np.nan)
    return out if out.ndim else float(out)


def oracle_bound(mean_abs_dbar: np.ndarray | float, mean_dbar: np.ndarray | float) -> np.ndarray | float:
    """OPTIMISTIC plug-in of the zero-price oracle improvement H = (E|Δ| − |EΔ|)/2 with Δ̄ for
    Δ: (mean |Δ̄| − |mean Δ̄|)/2. Generation noise inflates |Δ̄| (E|Δ̄| ≥ |EΔ̄| per state, by
    Jensen), so with a few repeats it is biased upward, by a lot (simulated truth 0.062, mean
    estimate 0.121). Report `oracle_range` instead; this is kept, labelled optimistic, without
    an interval."""
    return 0.5 * (mean_abs_dbar - np.abs(mean_dbar))


class OracleRange(NamedTuple):
    """Lower and upper bound of the zero-price oracle improvement H."""

    lower: np.ndarray | float
    upper: np.ndarray | float


def oracle_range(mean_theta: np.ndarray | float, mean_dbar: np.ndarray | float) -> OracleRange:
    """The range of the zero-price oracle improvement H = (E|Δ| − |EΔ|)/2 from the moments.

    Search-value study, Appendix E ("At zero token price, the ideal oracle improvement over the
    best constant is H = (E|Δ| − |EΔ|)/2"): since |Δ| ≤ 1, Δ² ≤ |Δ| ≤ √(EΔ²) in mean, so

        max{0, (EΔ² − |EΔ|)/2}  ≤  H  ≤  (√(EΔ²) − |EΔ|)/2,

    with EΔ² estimated without bias by mean θ̂ (`theta_hat`) and EΔ by mean Δ̄ (θ̂ = 0.0490 and
    mean gain 0.0568 give [0, 0.0823]). A negative mean θ̂ counts as 0 under the root.
    """
    theta = np.asarray(mean_theta, dtype=float)
    mu = np.abs(np.asarray(mean_dbar, dtype=float))
    lower = np.maximum(0.0, 0.5 * (theta - mu))
    upper = 0.5 * (np.sqrt(np.maximum(theta, 0.0)) - mu)
    if lower.ndim == 0:
        return OracleRange(float(lower), float(upper))
    return OracleRange(lower, upper)


class LevelSplit(NamedTuple):
    """Level-risk contrast of a forecaster against a constant historical level, split in two."""

    total: np.ndarray | float
    mean_bias: np.ndarray | float
    variation: np.ndarray | float


def level_split(
    mean_level: np.ndarray | float,
    mean_level_sq: np.ndarray | float,
    mean_level_target: np.ndarray | float,
    mean_target: np.ndarray | float,
    level0: np.ndarray | float,
) -> LevelSplit:
    """Split the level-risk contrast E(ℓ − ℓ*)² − E(ℓ₀ − ℓ*)² against a constant level ℓ₀.

    Search-value study, Appendix B ("Levels and gains": "For a constant historical level ℓ₀, the
    level-risk contrast decomposes further into the squared mean-bias difference and the term
    Var(ℓ) − 2Cov(ℓ, ℓ*)"):

        contrast = [(Eℓ − Eℓ*)² − (ℓ₀ − Eℓ*)²] + [Var(ℓ) − 2 Cov(ℓ, ℓ*)]
                 =        mean_bias            +          variation

    Inputs are (stratum-balanced) means over states: Eℓ, Eℓ², E[ℓ ℓ̂*] and Eℓ̂* with
    ℓ̂* = (Ȳ_T + Ȳ_S)/2 (unbiased for ℓ* given x, and ℓ is fixed given x, so E[ℓ ℓ̂*] is unbiased
    for E[ℓ ℓ*]). Var and Cov are plug-in population moments. The two parts add up exactly to
    the difference of the two forecasters' mean level risks (`level_risk`); the (Eℓ*)² terms
    and the outcome variance cancel. (Search-value study §5.1: −0.000293 mean bias and
    −0.034470 variation on Test-1632.)
    """
    mean_bias = (mean_level - mean_target) ** 2 - (level0 - mean_target) ** 2
    variation = (mean_level_sq - mean_level**2) - 2.0 * (mean_level_target - mean_level * mean_target)
    return LevelSplit(mean_bias + variation, mean_bias, variation)


@overload
def utility(reward: np.ndarray, tokens: np.ndarray | float, price: float) -> np.ndarray: ...
@overload
def utility(reward: float, tokens: np.ndarray, price: float) -> np.ndarray: ...
@overload
def utility(reward: float, tokens: float, price: float) -> float: ...
def utility(reward: np.ndarray | float, tokens: np.ndarray | float, price: float) -> np.ndarray | float:
    """U = Y − λ·T/1000: reward minus the price λ per thousand tokens spent."""
    return reward - price * tokens / 1000.0


def balanced_weights(strata: np.ndarray) -> np.ndarray:
    """Weights that make a weighted sum the mean of per-stratum means: w = 1 / (S · n_s)."""
    labels, inverse, sizes = np.unique(strata.astype(str), return_inverse=True, return_counts=True)
    return 1.0 / (len(labels) * sizes[inverse])


def balanced_mean(values: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Mean of per-stratum means of `values` (over axis 0; columns stay)."""
    return np.tensordot(balanced_weights(strata), values, axes=(0, 0))
