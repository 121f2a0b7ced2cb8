"""The spread of search gains across questions: SD of Δ with its sampling distribution, and how
much of the observed spread of Δ̄ is repeat (generation) noise.

Search-value study, §5.2 ("gain variance 0.0458, with interval [0.0364, 0.0560]. Its standard
deviation is 21.4 percentage points"), Figure 4 left ("the sampling distribution of gain
standard deviation") and Appendix B ("Gain variance and explained variation": V̂_Δ = Σ w θ̂ −
(Σ w Δ̄)², a plug-in population variance; "the cross-draw second moment removes within-question
generation noise"). With stratum-balanced means E_w:

    observed variance  V_obs = E_w[Δ̄²] − (E_w Δ̄)²          (spread of the observed gains)
    gain variance      V_Δ   = E_w[θ̂] − (E_w Δ̄)²            (θ̂ unbiased for Δ², Eq. 4)
    repeat noise       N     = E_w[s²_S/m_S + s²_T/m_T] = V_obs − V_Δ,

since Δ̄² − θ̂ = s²_S/m_S + s²_T/m_T exactly at every state (s² the unbiased variance of a role's
repeats): the noise part is an unbiased estimate of the mean variance of Δ̄ around Δ. SD of
gains = √V_Δ (undefined where V_Δ ≤ 0; such resamples count as SD 0). Every interval and the
sampling distribution come from the same component resamples as value.json's other intervals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.scores import balanced_mean, theta_hat, unbiased_variance

QUANTILES: tuple[float, ...] = (0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975)
BINS = 24


def noise_variance(states: StateTable) -> np.ndarray:
    """Per state s²_S/m_S + s²_T/m_T: the unbiased variance of Δ̄ around Δ from the repeats."""
    noise = np.zeros(len(states))
    for out in (states.search, states.think):
        noise += unbiased_variance(out.sum_y, out.sum_y2, out.m) / out.m
    return noise


def spread_columns(states: StateTable) -> np.ndarray:
    """Per-state columns (θ̂, Δ̄, Δ̄², noise) whose balanced means give every spread statistic."""
    dbar = states.dbar
    return np.column_stack([theta_hat(states.think, states.search), dbar, dbar * dbar, noise_variance(states)])


def spread_stats(means: np.ndarray) -> dict[str, np.ndarray]:
    """V_Δ, V_obs, N, SD and noise share from balanced means of `spread_columns` (… × 4)."""
    theta, dbar, dbar2, noise = (means[..., j] for j in range(4))
    v_delta = theta - dbar * dbar
    v_obs = dbar2 - dbar * dbar
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(v_obs > 0, noise / np.where(v_obs > 0, v_obs, 1.0), np.nan)
    return {
        "gain_variance": v_delta,
        "observed_variance": v_obs,
        "noise_variance": noise,
        "noise_share": share,
        "gain_sd": np.sqrt(np.maximum(v_delta, 0.0)),
        "observed_sd": np.sqrt(np.maximum(v_obs, 0.0)),
    }


def gain_spread(states: StateTable, *, resamples: int, seed: int, level: float, num: Any) -> dict[str, Any]:
    """value.json's `gain_spread`: V_Δ, its SD, the observed variance of Δ̄ and its repeat-noise
    part, each with its interval, and the bootstrap distribution of the SD (quantiles, SE,
    histogram; the share of resamples where V_Δ ≤ 0)."""
    cols = spread_columns(states)
    point = spread_stats(balanced_mean(cols, states.stratum))
    out: dict[str, Any] = {
        name: {"value": num(v) if name != "gain_sd" or point["gain_variance"] > 0 else None, "interval": None}
        for name, v in point.items()
    }
    out["formula"] = (
        "V_obs = E_w[Δ̄²] − (E_w Δ̄)² = V_Δ + N; V_Δ = E_w[θ̂] − (E_w Δ̄)²; N = E_w[s²_S/m_S + s²_T/m_T]; SD = √V_Δ"
    )
    out["sd_distribution"] = None
    if resamples <= 0:
        return out
    boot = spread_stats(bootstrap_means(cols, states.component, states.stratum, resamples=resamples, seed=seed))
    for name, samples in boot.items():
        lo, hi = percentile_interval(samples, level)
        out[name]["interval"] = [num(lo), num(hi)]
    sd = boot["gain_sd"]
    counts, edges = np.histogram(sd, bins=BINS)
    out["sd_distribution"] = {
        "resamples": len(sd),
        "mean": num(sd.mean()),
        "se": num(sd.std(ddof=1)) if len(sd) > 1 else None,
        "quantiles": {f"{q:g}": num(np.quantile(sd, q)) for q in QUANTILES},
        "undefined_share": float(np.mean(boot["gain_variance"] <= 0)),
        "histogram": {"edges": [num(e) for e in edges], "counts": [int(c) for c in counts]},
    }
    return out
