"""Simultaneous (max-standardised) bootstrap intervals over a declared family of contrasts.

Search-value study, Appendix B ("Analysis provenance": "Actor-matched family comparisons use a
maximum-standardized bootstrap across the declared methods"). For a family of K contrasts with
point estimates θ̂_k and B bootstrap replicates θ*_bk (the same resamples for every member):

    se_k = SD_b(θ*_bk),   M_b = max_k |θ*_bk − θ̂_k| / se_k,   c = quantile_level(M_b),
    simultaneous interval_k = θ̂_k ± c · se_k.

All K intervals then hold together in a share `level` of resamples (family-wise coverage),
where a marginal interval holds each one separately; c ≥ the marginal normal quantile, and it
grows with the number of nearly independent members. A member with se_k = 0 (its contrast does
not move across resamples: e.g. best constant − always SEARCH where the constant is SEARCH; an
se below `SE_FLOOR` is float rounding and counts as 0) or a non-finite replicate is left out of
the maximum and gets no interval (`excluded`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

#: An se this small relative to the contrast's size is rounding, not sampling variation (a
#: contrast that is the same in every resample, up to float error): left out of the maximum.
SE_FLOOR = 1e-9


class Simultaneous(NamedTuple):
    """Max-standardised intervals of a family: the critical value c, per member its se and
    interval (None where excluded), and why members were left out."""

    critical: float | None
    se: list[float | None]
    intervals: list[tuple[float, float] | None]
    excluded: dict[int, str]


def max_standardised(point: Sequence[float], samples: np.ndarray, level: float = 0.95) -> Simultaneous:
    """Simultaneous intervals θ̂_k ± c·se_k over the columns of `samples` (B × K replicates of
    the K contrasts `point`), c the `level` quantile of max_k |θ*_k − θ̂_k| / se_k (see the
    module docstring)."""
    est = np.asarray(point, dtype=float)
    reps = np.asarray(samples, dtype=float)
    if reps.ndim != 2 or reps.shape[1] != len(est):
        raise ValueError(f"samples must be (resamples × {len(est)}), got {reps.shape}")
    excluded: dict[int, str] = {}
    finite = np.isfinite(reps).all(axis=0) & np.isfinite(est)
    se = np.full(len(est), np.nan)
    if len(reps) >= 2:
        se[finite] = reps[:, finite].std(axis=0, ddof=1)
    for k in range(len(est)):
        if not finite[k]:
            excluded[k] = "not finite in some resample (or no estimate)"
        elif not se[k] > SE_FLOOR * max(1.0, float(np.abs(reps[:, k]).max())):
            excluded[k] = "no spread over resamples (se = 0, up to rounding)"
    keep = np.array([k not in excluded for k in range(len(est))], dtype=bool)
    if not keep.any():
        return Simultaneous(None, [None] * len(est), [None] * len(est), excluded)
    dev = np.abs(reps[:, keep] - est[keep]) / se[keep]
    critical = float(np.quantile(dev.max(axis=1), level))
    intervals: list[tuple[float, float] | None] = [
        (float(est[k] - critical * se[k]), float(est[k] + critical * se[k])) if keep[k] else None
        for k in range(len(est))
    ]
    return Simultaneous(critical, [float(s) if keep[k] else None for k, s in enumerate(se)], intervals, excluded)
