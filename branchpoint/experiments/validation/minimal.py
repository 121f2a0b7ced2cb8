"""The exact expectation of the minimal-search study's k* (the over-search %'s denominator).

Over-searching study, Appendix A.1 (Table 8): k*_q is the fewest searches, a truncation of the
execution's search sequence, that still reach the correct outcome; over-search % =
100 · (Σ k / Σ k* − 1) over the correct executions (`evaluation.studies.over_search_pct`).
branchpoint measures k* from real counterfactuals (`experiments.forking.minimal_searches`): the
smallest t < k whose THINK branches from the state after t searches (`initial` for t = 0) are
correct in at least half of their m repeats, else k. Given the execution, each truncation point
passes independently (its own branches, each with its own seed) with probability
P(Binomial(m, p_THINK) ≥ m/2), so E[k*] is a finite sum over the first passing point. The
simulator's truth of the over-search % of a study is then 100 · (Σ k / Σ E[k*] − 1), the ratio
of expectations its ratio estimator targets, conditional on the run's executions (which ones
were correct, and how often they searched).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scipy import stats as sps


def vote_passes(p: float, m: int) -> float:
    """P(at least half of m independent repeats succeed), each with probability p (0 when m = 0:
    a truncation point without branches never counts as reaching the correct outcome)."""
    if m <= 0:
        return 0.0
    return float(sps.binom.sf(math.ceil(m / 2) - 1, m, p))


def expected_min_searches(k: int, passes: Iterable[tuple[int, float]]) -> float:
    """E[min{t : point t passes} ∪ {k}] for independent truncation points (t, P(t passes)), t < k."""
    expected, none_yet = 0.0, 1.0
    for t, q in sorted(passes):
        if t >= k:
            continue
        expected += none_yet * q * t
        none_yet *= 1.0 - q
    return expected + none_yet * k
