"""The power calculation of a paired comparison: what sample size detects what difference.

Search-value study, §4.2 ("A 0.01 gain-risk difference with the historical paired standard
deviation 0.0651 requires about 333 independent questions for 80% normal-approximation power").
For per-question paired differences D_i with standard deviation σ, a two-sided level-α z test of
mean D = 0 against a true difference δ has power ≈ Φ(|δ|√n/σ − z_{1−α/2}), so

    n(δ) = ⌈((z_{1−α/2} + z_{power}) · σ / δ)²⌉          (σ 0.0651, δ 0.01 → 333),
    detectable δ at n = (z_{1−α/2} + z_{power}) · σ / √n.

These assume independent questions. The study's intervals resample support components with
strata weighted equally, so `design_effect` (the bootstrap variance of the balanced mean
difference over σ²/n) says how many independent questions one scored question is worth: n·deff
questions of this study's layout give the power n(δ) promises.
"""

from __future__ import annotations

import math

from scipy.stats import norm


def z_sum(alpha: float = 0.05, power: float = 0.8) -> float:
    """z_{1−α/2} + z_{power}: the standardised distance a two-sided test at α needs for `power`."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha}, {power}")
    return float(norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power))


def required_n(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Independent questions needed to detect a mean paired difference `delta` with `power`
    (two-sided level `alpha`, normal approximation); None when δ = 0 or σ is not finite."""
    if delta == 0 or not math.isfinite(sd) or not math.isfinite(delta):
        return None
    return max(1, math.ceil((z_sum(alpha, power) * sd / abs(delta)) ** 2))


def detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest |δ| that n independent questions detect with `power` (None when n < 1)."""
    if n < 1 or not math.isfinite(sd):
        return None
    return z_sum(alpha, power) * sd / math.sqrt(n)


def power_at(sd: float, n: int, delta: float, alpha: float = 0.05) -> float | None:
    """Normal-approximation power Φ(|δ|√n/σ − z_{1−α/2}) + Φ(−|δ|√n/σ − z_{1−α/2}) of n questions."""
    if n < 1 or not math.isfinite(sd) or not math.isfinite(delta):
        return None
    if sd <= 0:
        return 1.0 if delta != 0 else alpha
    shift = abs(delta) * math.sqrt(n) / sd
    z = float(norm.ppf(1.0 - alpha / 2.0))
    return float(norm.cdf(shift - z) + norm.cdf(-shift - z))
