"""Bootstrap intervals over questions: seeded, vectorised, paired between conditions.

How the resampling works (the choice every interval in metrics.json rests on):

- The unit is the question (`question_id`), not the execution: all executions of a resampled
  question (repeats, forks) come along with it, so intervals are honest about how few questions
  a study has.
- Resampling happens *within each condition*: a condition with Q distinct questions draws Q
  questions with replacement, B times (default 1,000). The draw is a multinomial count matrix
  `counts` (B × Q), so a resampled sum is one matrix product `counts @ per_question_sums`.
- Conditions with the same set of questions get the *same* draws (the seed is derived from the
  configured seed and the sorted question ids), so differences between conditions (with vs
  without search, one search cap vs the next) are paired bootstrap differences.
- A pooled number (all conditions, or one category over all conditions) adds the resampled sums
  of its conditions: a stratified bootstrap with conditions as strata.
- Intervals are percentile intervals (95 % by default) read off the resampled statistic without
  interpolation (`inverted_cdf`), so an infinite TPC in some resamples stays infinite. Resamples
  where the statistic is undefined (no answerable question drawn, say) are left out.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np


class QuestionBootstrap:
    """Multinomial question resamples, one matrix per distinct question set, reproducible by seed."""

    def __init__(self, n_resamples: int = 1000, seed: int = 0) -> None:
        if n_resamples < 0:
            raise ValueError("n_resamples must be >= 0")
        self.n_resamples = n_resamples
        self.seed = seed
        self._counts: dict[tuple[str, ...], np.ndarray] = {}

    @property
    def enabled(self) -> bool:
        return self.n_resamples > 0

    def counts(self, question_ids: Sequence[str]) -> np.ndarray:
        """B × Q resample counts for the sorted distinct `question_ids` (each row sums to Q)."""
        key = tuple(sorted(set(question_ids)))
        if key not in self._counts:
            digest = hashlib.sha256("\x1f".join(key).encode()).digest()
            entropy = [self.seed, int.from_bytes(digest[:8], "big")]
            rng = np.random.default_rng(np.random.SeedSequence(entropy))
            q = len(key)
            if q == 0:
                self._counts[key] = np.zeros((self.n_resamples, 0))
            else:
                draws = rng.multinomial(q, np.full(q, 1.0 / q), size=self.n_resamples)
                self._counts[key] = draws.astype(np.float64)
        return self._counts[key]

    def sums(self, question_ids: Sequence[str], row_questions: Sequence[str], values: np.ndarray) -> np.ndarray:
        """Resampled column sums of `values` (n × k), rows belonging to `row_questions`: B × k.

        `question_ids` is the question set being resampled (a condition's questions); every row's
        question must be in it.
        """
        key = tuple(sorted(set(question_ids)))
        index = {q: i for i, q in enumerate(key)}
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        rows = np.fromiter((index[q] for q in row_questions), dtype=np.intp, count=len(row_questions))
        per_question = (
            np.column_stack(
                [np.bincount(rows, weights=values[:, c], minlength=len(key)) for c in range(values.shape[1])]
            )
            if values.shape[1]
            else np.zeros((len(key), 0))
        )
        return self.counts(key) @ per_question


def ratio_samples(num: np.ndarray, den: np.ndarray, *, zero_den_inf: bool = False) -> np.ndarray:
    """num / den element-wise; where den == 0: +inf if `zero_den_inf` (TPC), else NaN (undefined)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, math.inf if zero_den_inf else math.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def percentile_ci(samples: np.ndarray | None, confidence: float = 0.95) -> list[float] | None:
    """[lo, hi] percentile interval of the defined (non-NaN) samples; None when there are none."""
    if samples is None:
        return None
    samples = np.asarray(samples, dtype=np.float64)
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return None
    alpha = round((1.0 - confidence) / 2.0, 12)  # 0.025, not 0.025000000000000022
    lo, hi = np.quantile(samples, [alpha, 1.0 - alpha], method="inverted_cdf")
    return [float(lo), float(hi)]
