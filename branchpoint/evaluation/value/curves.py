"""Matched-configuration learning curves of gain prediction (search-value study §5.3, Appendix D).

"The additional curves use four saved support-component outer folds, ten nested training
samples and budgets 20, 40, 80, 120, 240, 480, 800 and 1,100 questions. … Raw-probability
polynomial features, public-prefix features and frozen MiniLM vectors feed gain ridge
regressors. Three component-grouped training folds choose a penalty from {0.1, 1, 10, 100,
1000}. Weighted fitting gives equal task-stratum mass. A training-only guard additionally
compares each family with a constant-gain fit. Scoring averages squared losses over separate
fits." The band is the observed range across fitted samples; intervals at the largest budget
are support-component bootstrap intervals conditional on the fits.

Procedure (`learning_curves`), over all scored states of one study (one actor and search
configuration):
1. Outer folds: the support components dealt into 4 folds (`forecasters.grouped_folds`).
2. For each outer fold and sample s = 1..10: a seeded random order of the training pool's
   *questions* (the other folds); budget n trains on the states of the first n questions, so
   the samples are nested across budgets.
3. Per feature family and fit: gain ridge on Δ̄ = Ȳ_S − Ȳ_T and level ridge on (Ȳ_T + Ȳ_S)/2,
   sample weights giving every stratum equal mass, penalty by 3 grouped inner folds with the
   mean guard (`fitted.ridge_cv`); the held-out fold's states get f̂ and ℓ̂, hence
   (q_T, q_S) = clip(ℓ̂ ∓ f̂/2).
4. For budget n and sample s every state has one out-of-fold prediction: gain risk L_n,s and
   Brier_n,s are their stratum-balanced means. The curve is gain R²_Δ = 1 − mean_s L_n,s / V̂_Δ
   and mean_s Brier_n,s, with the band [min_s, max_s] of the per-sample values.

Budgets larger than the smallest training pool are left out (listed); when none of the
requested budgets fits, the curve uses the pool size itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval, single_component_strata
from branchpoint.evaluation.value.fitted import compose_level_gain, ridge_cv
from branchpoint.evaluation.value.forecasters import Forecast, grouped_folds
from branchpoint.evaluation.value.intervals import skill_interval
from branchpoint.evaluation.value.outcomes import StateTable
from branchpoint.evaluation.value.scores import (
    balanced_mean,
    balanced_weights,
    brier,
    gain_r2,
    gain_risk,
    gain_variance,
    theta_hat,
)

LEARNING_BUDGETS: tuple[int, ...] = (20, 40, 80, 120, 240, 480, 800, 1100)
CURVE_PENALTIES: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0, 1000.0)
OUTER_FOLDS = 4
INNER_FOLDS = 3
SAMPLES = 10


def _f(x: float) -> float | None:
    """A JSON-safe float: NaN (e.g. R²_Δ with V̂_Δ ≤ 0) → None."""
    x = float(x)
    return None if np.isnan(x) else x


def curve_families(states: StateTable, raw: Mapping[str, Forecast]) -> dict[str, np.ndarray]:
    """The feature families: `raw_poly:NAME` (degree-2 polynomial of a raw forecast's (q_T, q_S),
    sklearn `PolynomialFeatures`), `public_prefix` and `minilm` when the states carry them."""
    out: dict[str, np.ndarray] = {}
    from sklearn.preprocessing import PolynomialFeatures  # imported here: sklearn is slow to import

    poly = PolynomialFeatures(degree=2, include_bias=False)
    for name, fc in raw.items():
        out[f"raw_poly:{name}"] = poly.fit_transform(np.stack([fc.q_think, fc.q_search], axis=1))
    for name in ("public_prefix", "minilm"):
        if name in states.features:
            out[name] = states.features[name]
    return out


def nested_orders(
    questions: Sequence[str], pool: np.ndarray, samples: int, rng: np.random.Generator
) -> list[list[str]]:
    """`samples` random orders of the distinct questions among the `pool` rows."""
    qs = sorted({questions[int(i)] for i in np.flatnonzero(pool)})
    return [[qs[j] for j in rng.permutation(len(qs))] for _ in range(samples)]


def learning_curves(
    states: StateTable,
    families: Mapping[str, np.ndarray],
    *,
    budgets: Sequence[int] = LEARNING_BUDGETS,
    samples: int = SAMPLES,
    outer_folds: int = OUTER_FOLDS,
    inner_folds: int = INNER_FOLDS,
    penalties: Sequence[float] = CURVE_PENALTIES,
    seed: int = 0,
    resamples: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Gain R²_Δ and Brier per training budget for each feature family (module doc)."""
    n = len(states)
    comps = sorted(set(states.component.tolist()))
    k = min(outer_folds, len(comps))
    if k < 2:
        return {"skipped": "learning curves need at least 2 support components"}
    fold = grouped_folds(states.component, k, seed)
    pools = [fold != j for j in range(k)]
    pool_questions = [len({states.question_id[i] for i in np.flatnonzero(p)}) for p in pools]
    fits = [b for b in budgets if b <= min(pool_questions)]
    dropped = [b for b in budgets if b > min(pool_questions)]
    if not fits:
        fits = [min(pool_questions)]
    rng = np.random.default_rng(seed)
    orders = [nested_orders(states.question_id, p, samples, rng) for p in pools]
    question = np.array(states.question_id, dtype=object)
    theta = theta_hat(states.think, states.search)
    dbar = states.dbar
    target_level = 0.5 * (states.think.mean_y + states.search.mean_y)
    v_delta = float(gain_variance(balanced_mean(theta, states.stratum), balanced_mean(dbar, states.stratum)))
    out: dict[str, Any] = {
        "budgets": list(fits),
        "budgets_left_out": dropped,
        "outer_folds": k,
        "samples": samples,
        "inner_folds": inner_folds,
        "penalties": list(penalties),
        "gain_variance": v_delta,
        "families": {},
    }
    for fam, x in families.items():
        by_budget: dict[str, Any] = {}
        last_cols: tuple[np.ndarray, np.ndarray] | None = None
        for budget in fits:
            risks, briers, guards = [], [], 0
            risk_cols, brier_cols = np.zeros(n), np.zeros(n)
            for s in range(samples):
                f_hat, l_hat = np.zeros(n), np.zeros(n)
                for j in range(k):
                    chosen = set(orders[j][s][:budget])
                    train = pools[j] & np.isin(question, list(chosen))
                    w = np.zeros(n)
                    # equal stratum mass, scaled to mean 1 so the penalty means what it does unweighted
                    w[train] = balanced_weights(states.stratum[train]) * train.sum()
                    gain, g_info = ridge_cv(
                        x,
                        dbar,
                        train,
                        states.component,
                        penalties=penalties,
                        folds=inner_folds,
                        weights=w,
                        mean_guard=True,
                    )
                    lev, _ = ridge_cv(
                        x,
                        target_level,
                        train,
                        states.component,
                        penalties=penalties,
                        folds=inner_folds,
                        weights=w,
                        mean_guard=True,
                    )
                    held = fold == j
                    f_hat[held], l_hat[held] = gain[held], lev[held]
                    guards += g_info["penalty"] == "mean"
                q_t, q_s = compose_level_gain(l_hat, f_hat)
                f = q_s - q_t
                risk = gain_risk(f, dbar, theta)
                bri = brier(q_t, q_s, states.think, states.search)
                risks.append(float(balanced_mean(risk, states.stratum)))
                briers.append(float(balanced_mean(bri, states.stratum)))
                risk_cols += risk / samples
                brier_cols += bri / samples
            r2_each = np.array([float(gain_r2(r, v_delta)) for r in risks])
            by_budget[str(budget)] = {
                "gain_risk": float(np.mean(risks)),
                "gain_r2": _f(float(gain_r2(float(np.mean(risks)), v_delta))),
                "gain_r2_band": [_f(np.min(r2_each)), _f(np.max(r2_each))],
                "brier": float(np.mean(briers)),
                "brier_band": [min(briers), max(briers)],
                "mean_guard_share": guards / (samples * k),
            }
            last_cols = (risk_cols, brier_cols)
        entry: dict[str, Any] = {"by_budget": by_budget}
        if last_cols is not None and resamples > 0:
            entry["largest_budget"] = _largest_intervals(
                states, last_cols, theta, dbar, fits[-1], resamples, seed, level
            )
        out["families"][fam] = entry
    return out


def _largest_intervals(
    states: StateTable,
    cols: tuple[np.ndarray, np.ndarray],
    theta: np.ndarray,
    dbar: np.ndarray,
    budget: int,
    resamples: int,
    seed: int,
    level: float,
) -> dict[str, Any]:
    """Support-component intervals at the largest budget, conditional on the fits: the per-state
    losses averaged over samples, with θ̂ and Δ̄ resampled jointly for R²_Δ."""
    single = single_component_strata(states.component, states.stratum)
    if single:
        return {"budget": budget, "withheld": f"single-component strata: {', '.join(single)}"}
    matrix = np.stack([cols[0], cols[1], theta, dbar], axis=1)
    boot = bootstrap_means(matrix, states.component, states.stratum, resamples=resamples, seed=seed)
    v_boot = np.asarray(gain_variance(boot[:, 2], boot[:, 3]))
    point = balanced_mean(matrix, states.stratum)
    r2 = skill_interval(
        np.asarray(gain_r2(boot[:, 0], v_boot)), v_boot, level, float(gain_variance(point[2], point[3]))
    )
    lo_b, hi_b = percentile_interval(boot[:, 1], level)
    return {
        "budget": budget,
        "gain_r2_interval": [_f(r2.interval[0]), _f(r2.interval[1])] if r2.interval is not None else None,
        "gain_r2_undefined_share": r2.undefined_share,
        "gain_r2_withheld": r2.withheld,
        "brier_interval": [_f(float(lo_b)), _f(float(hi_b))],
    }
