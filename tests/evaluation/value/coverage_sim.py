"""Synthetic fork studies with known truth, for the coverage of value.json's intervals.

A population of support components per stratum (each 1-3 states with true p_T, p_S); a study
draws K components per stratum, m Bernoulli repeats per action and state, and is scored with the
project's own columns (`theta_hat`, Δ̄) and bootstrap (`bootstrap_means`). The truth is the
population's stratum-balanced moments (each stratum's mean over its states, strata weighted
equally), the target of a support-component bootstrap. Layouts:

- `mixed`: gains spread around +0.05 (V_Δ ≈ 0.04, component and state effects on success and gain);
- `upper`: Δ = ±0.3 with EΔ = 0 exactly, where H = (E|Δ| − |EΔ|)/2 equals its upper bound
  (√EΔ² − |EΔ|)/2 (the layout where the old oracle-range interval undercovered);
- `lower`: Δ ∈ {−1, 0, 1}, where H equals its lower bound (EΔ² − |EΔ|)/2;
- `flat`: an almost constant gain (V_Δ ≈ 0.001), where V̂_Δ ≤ 0 in many resamples.

Used by tests/evaluation/value/test_intervals.py and benchmarks/interval_coverage.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from branchpoint.evaluation.value.bootstrap import bootstrap_means
from branchpoint.evaluation.value.outcomes import RoleOutcomes
from branchpoint.evaluation.value.scores import gain_risk, theta_hat

LAYOUTS = ("mixed", "upper", "lower", "flat")


@dataclass(frozen=True)
class Population:
    """Per stratum, components of states: each state's stratum, component, p_T, p_S, and a gain
    forecast f = Δ + ε (ε fixed per state, its spread half the gains')."""

    stratum: np.ndarray
    component: np.ndarray
    p_think: np.ndarray
    p_search: np.ndarray
    forecast: np.ndarray

    @property
    def delta(self) -> np.ndarray:
        return self.p_search - self.p_think

    def balanced(self, x: np.ndarray) -> float:
        return float(np.mean([x[self.stratum == s].mean() for s in np.unique(self.stratum)]))

    def truth(self) -> dict[str, float]:
        d = self.delta
        mu, theta = self.balanced(d), self.balanced(d * d)
        return {
            "mean_gain": mu,
            "theta": theta,
            "gain_variance": theta - mu * mu,
            "oracle_h": 0.5 * (self.balanced(np.abs(d)) - abs(mu)),
            "gain_r2": 1.0 - self.balanced((self.forecast - d) ** 2) / (theta - mu * mu),
        }


def population(layout: str, strata: int = 5, per_stratum: int = 4000, seed: int = 0) -> Population:
    """A population of `per_stratum` components in each of `strata` strata, in `layout`."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, int, float, float]] = []
    comp = 0
    for s in range(strata):
        level = rng.normal(0.0, 0.6)
        signs = np.tile([1.0, -1.0], per_stratum // 2 + 1)[:per_stratum]
        rng.shuffle(signs)
        for c in range(per_stratum):
            n = int(rng.integers(1, 4))
            for _ in range(n):
                if layout == "mixed":
                    p_t = 1 / (1 + np.exp(-(level + rng.normal(0, 0.8))))
                    gain = 0.05 + 0.3 * signs[c] * rng.uniform(0.3, 1.0) + rng.normal(0, 0.08)
                    p_s = float(np.clip(p_t + gain, 0.02, 0.98))
                elif layout == "upper":
                    p_t, p_s = 0.5 - 0.15 * signs[c], 0.5 + 0.15 * signs[c]
                elif layout == "lower":
                    u = rng.uniform()
                    p_t, p_s = (0.0, 1.0) if u < 0.15 else (1.0, 0.0) if u < 0.25 else (0.6, 0.6)
                elif layout == "flat":
                    p_t = 0.5 + 0.1 * rng.normal()
                    p_s = float(np.clip(p_t + 0.05 + 0.03 * rng.normal(), 0.0, 1.0))
                else:
                    raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
                rows.append((s, comp, float(p_t), float(p_s)))
            comp += 1
    a = np.array(rows)
    delta = a[:, 3] - a[:, 2]
    noise = rng.normal(0.0, 0.5 * float(np.std(delta)) + 1e-3, len(a))
    return Population(a[:, 0].astype(int), a[:, 1].astype(int), a[:, 2], a[:, 3], delta + noise)


@dataclass(frozen=True)
class Study:
    """One drawn study: per-state columns θ̂, Δ̄ and the forecast's gain risk L with strata and
    components, and the bootstrap means of the three columns in each resample."""

    theta: np.ndarray
    dbar: np.ndarray
    risk: np.ndarray
    stratum: np.ndarray
    component: np.ndarray
    boot: np.ndarray  # (resamples × 3): mean θ̂, mean Δ̄, mean L
    seed: int  # of the resamples (the same seed redraws them)

    def point(self) -> tuple[float, float, float]:
        from branchpoint.evaluation.value.scores import balanced_mean

        m = balanced_mean(np.stack([self.theta, self.dbar, self.risk], axis=1), self.stratum)
        return float(m[0]), float(m[1]), float(m[2])


def draw_study(
    pop: Population, rng: np.random.Generator, *, components: int = 8, m: int = 4, resamples: int = 1000
) -> Study:
    """K = `components` components per stratum (with replacement from the population), m
    repeats per action, and `resamples` within-strata resamples of components."""
    picks = []
    for s in np.unique(pop.stratum):
        comps = np.unique(pop.component[pop.stratum == s])
        picks += list(rng.choice(comps, size=components, replace=True))
    idx, label = [], []
    for j, c in enumerate(picks):
        members = np.flatnonzero(pop.component == c)
        idx += list(members)
        label += [j] * len(members)
    idx_a = np.array(idx)
    y_t = (rng.uniform(size=(len(idx_a), m)) < pop.p_think[idx_a, None]).astype(float)
    y_s = (rng.uniform(size=(len(idx_a), m)) < pop.p_search[idx_a, None]).astype(float)
    think, search = (RoleOutcomes(list(y), [np.zeros(m)] * len(y), [[None] * m] * len(y)) for y in (y_t, y_s))
    theta = theta_hat(think, search)
    dbar = search.mean_y - think.mean_y
    risk = gain_risk(pop.forecast[idx_a], dbar, theta)
    strata = pop.stratum[idx_a].astype(str)
    comps = np.array([f"c{j}" for j in label])
    seed = int(rng.integers(2**31))
    boot = bootstrap_means(np.stack([theta, dbar, risk], axis=1), comps, strata, resamples=resamples, seed=seed)
    return Study(theta, dbar, risk, strata, comps, boot, seed)
