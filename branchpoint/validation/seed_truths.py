"""The truth of seed 002's remaining analyses in value.json (`evaluation.value.seed_analyses`),
or why a section has none, from the simulator's truth of a study (`StudyTruth`).

- paired router differences (search-value study §5.4–5.5): the difference of the two routers'
  truths (`truths.consistency`, `truths.constant`, ...), the functional the paired difference
  of their per-state utilities targets;
- repeat noise of Δ̄ (§5.2, Appendix B): E_w[p_S(1 − p_S)/m_S + p_T(1 − p_T)/m_T], the mean
  variance of Δ̄ around Δ that E_w[s²_S/m_S + s²_T/m_T] estimates without bias (0/1 rewards,
  independent repeats), m the branches forked per role;
- SD of gains: √V_Δ, estimated by √V̂_Δ, a plug-in (V̂_Δ low by Var(mean Δ̄), and the square root
  concave): compared and reported, not checked (`quantities.PLUG_IN`);
- sections without a truth here raise `NotApplicable` with the reason (`NO_TRUTH`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from branchpoint.validation import truths as T
from branchpoint.validation.study import StudyResult

#: Why a section of seed_analyses has no truth to compare with (validation.json says so).
NO_TRUTH: dict[str, str] = {
    "simultaneous intervals": "simultaneous intervals are wider than the marginal ones by design (they hold for a "
    "family together): each member's marginal coverage exceeds the level, so the per-quantity coverage check does "
    "not apply; the members' estimates are the paired router differences, which are checked",
    "power calculation": "a planning calculation from the observed SD of per-state differences (n for a stated "
    "difference), not an estimator of a quantity the simulator's truth defines",
    "failure rates": "the study's truth gives each continuation's success probability, tokens and searches "
    "(`sim.truth.Value`), not its probability of a malformed or length-limited output",
    "per-stratum panels": "each stratum's entry is the estimator already checked on the balanced mean, restricted to "
    "one stratum; the quantities table is fixed while the strata differ by study, so no row per stratum",
}


def no_truth(section: str) -> Callable[[StudyResult], float]:
    """The truth function of a section without one: it raises NotApplicable with the reason."""

    def truth(r: StudyResult) -> float:
        raise T.NotApplicable(NO_TRUTH[section])

    return truth


def router_difference(r: StudyResult, price: float, a: float, b: float) -> float:
    """Truth of a paired router difference: the two routers' truths a − b (each already checks
    that the price's utilities exist in this study)."""
    return a - b


def noise_variance(r: StudyResult) -> float:
    """E_w[p_S(1 − p_S)/m_S + p_T(1 − p_T)/m_T] over the truth's scored states."""
    p_t, p_s = T.pt(r), T.ps(r)
    m_t, m_s = r.truth.column("m", "T"), r.truth.column("m", "S")
    return T.bal(p_s * (1 - p_s) / m_s + p_t * (1 - p_t) / m_t, r)


def gain_sd(r: StudyResult) -> float:
    """√V_Δ of the truth (where the gain is not 0 everywhere)."""
    return math.sqrt(max(T.gain_defined(r, T.v_delta(r)), 0.0))
