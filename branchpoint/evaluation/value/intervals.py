"""Intervals that say when they cannot be trusted: gain skill R²_Δ, the zero-price oracle range,
and the BCa interval offered beside the percentile one.

- **R²_Δ** = 1 − L/V_Δ is undefined in a resample where V_Δ ≤ 0 (search-value study, Appendix B,
  "Gain variance and explained variation": "The reported full-cohort variance denominators remain
  positive across all bootstrap samples"). Dropping those resamples, as a NaN-ignoring percentile
  does, biases the interval (they are the resamples with the smallest spread of gains, whose R²_Δ
  runs off to ±∞). Here they count at both ends (−∞ for the lower limit, +∞ for the upper),
  which can only widen the interval; their share is reported, and past (1 − level)/2 a limit
  would be infinite, so the interval is withheld and the reason said (`skill_interval`).
- **Oracle range.** H = (E|Δ| − |EΔ|)/2 lies in [max{0, (EΔ² − |EΔ|)/2}, (√EΔ² − |EΔ|)/2]
  (Appendix E). The bootstrap percentiles of the two bounds undercover where H sits at the upper
  bound and EΔ ≈ 0 (|mean Δ̄| is pushed away from 0 in every resample, so the upper bound's upper
  end falls short). `oracle_interval` instead takes confidence limits of EΔ² and of |EΔ| (the
  latter from EΔ's, with 0 inside when EΔ's interval holds 0), each at level 1 − (1 − level)/2 so
  that both hold together with probability ≥ level (Bonferroni), and runs from the lower bound at
  the worst corner of that rectangle to the upper bound at its best.
- **BCa** (Efron 1987): the percentile interval with its levels moved for the bootstrap
  distribution's median bias z₀ and its skewness (acceleration a, from the delete-one-component
  jackknife within strata). Offered as `bca_interval`; see docs/search-value.md for the coverage
  each reaches in simulation.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.stats import norm

from branchpoint.evaluation.value.bootstrap import home_groups, label_codes


class SkillInterval(NamedTuple):
    """An interval of R²_Δ (None: withheld), the share of resamples where it is undefined, why withheld."""

    interval: tuple[float, float] | None
    undefined_share: float
    withheld: str | None


def max_undefined_share(level: float) -> float:
    """The largest share of undefined resamples an interval at `level` tolerates: (1 − level)/2."""
    return (1.0 - level) / 2.0


def skill_interval(samples: np.ndarray, v_delta: np.ndarray, level: float, point_v_delta: float) -> SkillInterval:
    """Percentile interval of R²_Δ-type `samples` (one per resample), counting the resamples where
    the denominator `v_delta` ≤ 0 (or the sample is not finite) at both ends, or None when that
    share exceeds (1 − level)/2 or the scored states' own V_Δ ≤ 0 (see the module docstring)."""
    samples = np.asarray(samples, dtype=float)
    undefined = ~(np.asarray(v_delta, dtype=float) > 0) | ~np.isfinite(samples)
    share = float(undefined.mean()) if len(samples) else 0.0
    limit = max_undefined_share(level)
    if not point_v_delta > 0:
        return SkillInterval(None, share, "V_Δ ≤ 0 on the scored states: R²_Δ = 1 − L/V_Δ is undefined")
    if share > limit:
        return SkillInterval(
            None,
            share,
            f"V_Δ ≤ 0 in {share:.1%} of resamples (more than {limit:.1%}): R²_Δ is undefined there, so a limit of "
            "the interval would be infinite",
        )
    alpha = (1.0 - level) / 2.0
    with warnings.catch_warnings():  # ±inf interpolated with a finite neighbour: NaN, caught below
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = float(np.quantile(np.where(undefined, -np.inf, samples), alpha))
        hi = float(np.quantile(np.where(undefined, np.inf, samples), 1.0 - alpha))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return SkillInterval(
            None, share, f"V_Δ ≤ 0 in {share:.1%} of resamples: R²_Δ is undefined there, so a limit would be infinite"
        )
    return SkillInterval((lo, hi), share, None)


def gain_r2_note(intervals: list[SkillInterval], level: float) -> dict[str, object]:
    """value.json's `intervals.gain_r2_undefined`: the share of resamples where R²_Δ is undefined
    (V_Δ ≤ 0; the same resamples for every forecaster), the share tolerated, and why the R²_Δ
    intervals are withheld (None: reported)."""
    share = max((iv.undefined_share for iv in intervals), default=0.0)
    reason = next((iv.withheld for iv in intervals if iv.withheld), None)
    return {
        "share": share,
        "max_share": max_undefined_share(level),
        "rule": "resamples with V_Δ ≤ 0 count as −∞ for the lower limit and +∞ for the upper; past the share a limit "
        "is infinite and the interval is withheld",
        "withheld": reason,
    }


class OracleInterval(NamedTuple):
    """The oracle range's interval and the confidence limits of EΔ² and |EΔ| it comes from."""

    interval: tuple[float, float]
    theta_limits: tuple[float, float]
    abs_mean_limits: tuple[float, float]


def _limits(samples: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1.0 - alpha))


def abs_limits(lo: float, hi: float) -> tuple[float, float]:
    """Confidence limits of |μ| from limits [lo, hi] of μ: [0, max] when the interval holds 0."""
    if lo <= 0.0 <= hi:
        return 0.0, max(-lo, hi)
    return min(abs(lo), abs(hi)), max(abs(lo), abs(hi))


def oracle_interval(theta: np.ndarray, mean_gain: np.ndarray, level: float) -> OracleInterval:
    """Interval of H = (E|Δ| − |EΔ|)/2 from resampled mean θ̂ (EΔ²) and mean Δ̄ (EΔ): Bonferroni
    limits of EΔ² and |EΔ| at 1 − (1 − level)/2 each, then [max{0, (θ_lo − |μ|_hi)/2},
    (√θ_hi − |μ|_lo)/2] (search-value study, Appendix E; see the module docstring)."""
    joint = 1.0 - (1.0 - level) / 2.0
    t_lo, t_hi = _limits(np.asarray(theta, dtype=float), joint)
    m_lo, m_hi = abs_limits(*_limits(np.asarray(mean_gain, dtype=float), joint))
    t_lo, t_hi = max(t_lo, 0.0), max(t_hi, 0.0)  # EΔ² ≥ 0
    lower = max(0.0, 0.5 * (t_lo - m_hi))
    upper = max(lower, 0.5 * (np.sqrt(t_hi) - m_lo))
    return OracleInterval((lower, float(upper)), (t_lo, t_hi), (m_lo, m_hi))


def oracle_section(point: dict[str, float], boot: dict[str, np.ndarray], level: float) -> dict[str, object]:
    """value.json's `oracle_range`: the point bounds of H from mean θ̂ and mean Δ̄ (`scores.oracle_range`)
    and, with resamples, the interval from joint confidence limits of EΔ² and |EΔ| (`oracle_interval`)."""
    from branchpoint.evaluation.value.scores import oracle_range

    lower, upper = oracle_range(point["theta"], point["dbar"])
    out: dict[str, object] = {
        "lower": _num(lower),
        "upper": _num(upper),
        "interval": None,
        "formula": "max{0, (Eθ̂ − |EΔ̄|)/2} ≤ H = (E|Δ| − |EΔ|)/2 ≤ (√Eθ̂ − |EΔ̄|)/2",
    }
    if boot:
        iv = oracle_interval(boot["theta"], boot["dbar"], level)
        out["interval"] = [_num(iv.interval[0]), _num(iv.interval[1])]
        out["interval_from"] = {
            "method": f"Bonferroni: limits of EΔ² (mean θ̂) and |EΔ| (from mean Δ̄'s) at {1 - (1 - level) / 2:.3g} "
            "each; lower bound at the rectangle's worst corner, upper bound at its best",
            "theta_limits": [_num(iv.theta_limits[0]), _num(iv.theta_limits[1])],
            "abs_mean_gain_limits": [_num(iv.abs_mean_limits[0]), _num(iv.abs_mean_limits[1])],
        }
    return out


def _num(x: object) -> float | None:
    value = float(x)  # type: ignore[arg-type]
    return value if np.isfinite(value) else None


def jackknife_means(values: np.ndarray, components: np.ndarray, strata: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stratum-balanced column means with each component left out in turn (C × k), and each
    component's home-stratum index (C): the delete-one-component jackknife BCa's acceleration uses."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    comp, n_comp = label_codes(components)
    strat, n_strata = label_codes(strata)
    cells = comp * n_strata + strat
    k = values.shape[1]
    sums = np.zeros((n_comp * n_strata, k))
    np.add.at(sums, cells, values)
    sizes = np.bincount(cells, minlength=n_comp * n_strata).astype(float).reshape(n_comp, n_strata)
    by_cell = sums.reshape(n_comp, n_strata, k)
    s_sum = by_cell.sum(axis=0)[None] - by_cell  # row i: every component but i
    s_size = sizes.sum(axis=0)[None] - sizes
    present = s_size > 0
    means = s_sum / np.where(present, s_size, 1.0)[:, :, None]
    out = (means * present[:, :, None]).sum(axis=1) / present.sum(axis=1)[:, None]
    home = np.empty(n_comp, dtype=int)
    for s, members in enumerate(home_groups(components, strata)):
        home[members] = s
    return out, home


def bca_interval(
    samples: np.ndarray,
    estimate: float,
    jackknife: np.ndarray,
    home: np.ndarray,
    level: float,
) -> tuple[float, float]:
    """BCa interval from bootstrap `samples` of a statistic, its `estimate`, and its jackknife
    values (one per left-out component, `home` its stratum): z₀ = Φ⁻¹(share of samples below the
    estimate, ties halved), a = Σ U³ / (6 (Σ U²)^{3/2}) with U = (K_h − 1)(mean_h − value) within
    each stratum h of K_h components; levels Φ(z₀ + (z₀ + z)/(1 − a(z₀ + z))) at z = ±z_{α/2}."""
    samples = np.asarray(samples, dtype=float)
    samples = samples[np.isfinite(samples)]
    below = (np.sum(samples < estimate) + 0.5 * np.sum(samples == estimate)) / len(samples)
    z0 = float(norm.ppf(min(max(below, 1e-9), 1.0 - 1e-9)))
    u = np.zeros(len(jackknife))
    for h in np.unique(home):
        members = home == h
        k = int(members.sum())
        if k > 1:
            u[members] = (k - 1) * (jackknife[members].mean() - jackknife[members])
    denom = 6.0 * float(np.sum(u**2)) ** 1.5
    a = float(np.sum(u**3)) / denom if denom > 0 else 0.0
    z = float(norm.ppf((1.0 + level) / 2.0))
    levels = [float(norm.cdf(z0 + (z0 + q) / (1.0 - a * (z0 + q)))) for q in (-z, z)]
    return float(np.quantile(samples, levels[0])), float(np.quantile(samples, levels[1]))


def bca_of(
    stat: Callable[..., np.ndarray | float],
    point: dict[str, float],
    boot: dict[str, np.ndarray],
    jack: dict[str, np.ndarray],
    home: np.ndarray,
    keys: tuple[str, ...],
    level: float,
) -> tuple[float, float]:
    """`bca_interval` of a statistic of column means, from the point, bootstrap and jackknife columns."""
    return bca_interval(
        np.asarray(stat(*(boot[k] for k in keys))),
        float(stat(*(point[k] for k in keys))),
        np.asarray(stat(*(jack[k] for k in keys)), dtype=float),
        home,
        level,
    )


def _linearised(n: np.ndarray, sums: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stratum-balanced means of θ̂ and Δ̄ (columns 0, 1) and V_Δ, in each row of draw counts `n`
    (B × C), and each component's linearised contribution to them (B × C × 3)."""
    drawn = n @ sizes  # B × S: states drawn per stratum
    present = drawn > 0
    safe = np.where(present, drawn, 1.0)
    ybar = np.einsum("bc,csk->bsk", n, sums) / safe[:, :, None]
    weight = present / present.sum(axis=1, keepdims=True)  # strata present weigh equally
    est = (ybar * weight[:, :, None]).sum(axis=1)
    resid = sums[None] - ybar[:, None] * sizes[None, :, :, None]  # B × C × S × k
    z = (resid * (weight / safe)[:, None, :, None]).sum(axis=2)
    theta, mu = est[:, 0], est[:, 1]
    est = np.column_stack([theta, mu, theta - mu * mu])
    z = np.concatenate([z, (z[:, :, 0] - 2.0 * mu[:, None] * z[:, :, 1])[:, :, None]], axis=2)
    return est, z


def _linearised_se(n: np.ndarray, z: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """The within-home-stratum variance of the drawn components' contributions, per row: Σ_g
    d/(d − 1) Σ_draws (z − z̄_g)² over the d draws of group g, square-rooted (B × 3). A resample
    draws d = K − 1 of a group's K components (Rao–Wu), so its variance is of a (K − 1)-component
    mean: scaled by (K − 1)/K to the K-component mean the original estimate is."""
    var = np.zeros((n.shape[0], z.shape[2]))
    for members in groups:
        k = len(members)
        if k < 2:
            continue
        w = n[:, members].astype(float)
        d = w.sum(axis=1)
        zm = np.einsum("bc,bck->bk", w, z[:, members]) / np.maximum(d, 1.0)[:, None]
        ss = np.einsum("bc,bck->bk", w, (z[:, members] - zm[:, None]) ** 2)
        scale = np.where(d < k, (k - 1.0) / k, 1.0)  # the original sample draws all K
        var += (scale * d / np.maximum(d - 1.0, 1.0))[:, None] * ss
    return np.sqrt(var)


def studentized_intervals(
    theta: np.ndarray,
    dbar: np.ndarray,
    components: np.ndarray,
    strata: np.ndarray,
    *,
    resamples: int,
    seed: int,
    level: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Studentized (bootstrap-t) intervals of mean θ̂, mean Δ̄ and V_Δ = mean θ̂ − (mean Δ̄)²:
    t* = (est* − est)/se* over the same within-strata resamples of components as the percentile
    intervals, se the linearised (delta-method) standard error of the stratum-balanced means
    within home strata, and [est − t*_{1−α/2}·se, est − t*_{α/2}·se]. The pivot carries the
    few-cluster t tails and V_Δ's skew that the percentile interval misses."""
    from branchpoint.evaluation.value.bootstrap import count_chunks

    values = np.column_stack([np.asarray(theta, dtype=float), np.asarray(dbar, dtype=float)])
    comp, n_comp = label_codes(components)
    strat, n_strata = label_codes(strata)
    sums = np.zeros((n_comp, n_strata, 2))
    np.add.at(sums, (comp, strat), values)
    sizes = np.zeros((n_comp, n_strata))
    np.add.at(sizes, (comp, strat), 1.0)
    groups = home_groups(components, strata)
    ones = np.ones((1, n_comp))
    est0, z0 = _linearised(ones, sums, sizes)
    se0 = _linearised_se(ones, z0, groups)[0]
    pivots = []
    for counts in count_chunks(n_comp, resamples, seed, groups):
        est, z = _linearised(counts.astype(float), sums, sizes)
        se = _linearised_se(counts, z, groups)
        with np.errstate(divide="ignore", invalid="ignore"):
            pivots.append((est - est0) / se)
    t = np.concatenate(pivots)
    alpha = (1.0 - level) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t_hi, t_lo = np.nanquantile(t, 1.0 - alpha, axis=0), np.nanquantile(t, alpha, axis=0)
    names = ("theta", "mean_gain", "gain_variance")
    return {
        k: (float(est0[0, j] - t_hi[j] * se0[j]), float(est0[0, j] - t_lo[j] * se0[j])) for j, k in enumerate(names)
    }
