"""Shared-label audit bounds and three-pair composition (search-value study, Appendices C and D).

Shared-label bounds ("Shared labels and sample weights"): an audited answer agreed correct has
label interval [1, 1], agreed incorrect [0, 0], any other [0, 1]. One variable labels every
repeated occurrence of the same question–answer pair, across actions and checkpoints. A paired
contrast of two forecasts is linear in the observed rewards, e.g. the gain-risk contrast

    D_i = f_i² − b_i² − 2(f_i − b_i)(Ȳ_i,S − Ȳ_i,T)                       (Eq. 6)

so its mean is const + Σ_k C_k y_k over answer labels y_k, C_k the summed coefficient of the
pair k over all its occurrences ("We sum each case's coefficients before varying its
uncertain label"). The lower bound sets each uncertain y_k to 1 where C_k < 0 and 0 otherwise;
the upper bound the reverse. With audit inclusion probabilities π (a sampled audit), each
audited pair's correction (bound − original label) is weighted by 1/π (inverse inclusion,
Horvitz–Thompson); π = 1 (everything audited) by default. The audit-sampling uncertainty of
those corrections is reported separately from the component bootstrap ("A finite-population
variance estimate reports the uncertainty of the sampled corrections separately"), as a
Poisson-sampling variance estimate Σ (w·correction)² (1 − π)/π² over the audited pairs.

Three-pair composition (Appendix D, Eqs. 7–9): from histories of actor/source pairs A/X, A/Y
and B/X, the B/Y forecast is p̃_BY,T = p̃_BX,T, Δ̃_BY = Δ̃_BX + Δ̃_AY − Δ̃_AX,
p̃_BY,S = clip(p̃_BY,T + Δ̃_BY).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.evaluation.value.scores import balanced_weights


class LinearContrast(NamedTuple):
    """A per-state contrast const_i + α_T,i Ȳ_T,i + α_S,i Ȳ_S,i."""

    const: np.ndarray
    alpha_think: np.ndarray
    alpha_search: np.ndarray


def gain_contrast(f: np.ndarray, b: np.ndarray) -> LinearContrast:
    """Eq. 6: D = f² − b² − 2(f − b)(Ȳ_S − Ȳ_T), the gain-risk difference L(f) − L(b) (θ̂ cancels)."""
    return LinearContrast(f * f - b * b, 2.0 * (f - b), -2.0 * (f - b))


def brier_contrast(
    q_think_a: np.ndarray, q_search_a: np.ndarray, q_think_b: np.ndarray, q_search_b: np.ndarray
) -> LinearContrast:
    """Brier(A) − Brier(B) = ½Σ_a [q_A,a² − q_B,a² − 2(q_A,a − q_B,a)Ȳ_a] (the ΣY²/m terms cancel)."""
    const = 0.5 * (q_think_a**2 - q_think_b**2 + q_search_a**2 - q_search_b**2)
    return LinearContrast(const, -(q_think_a - q_think_b), -(q_search_a - q_search_b))


class LabelBounds(NamedTuple):
    """Per-state columns whose (stratum-balanced) means are the contrast under the original
    labels, its lower bound and its upper bound; `uncertain_pairs` counts the varied labels;
    `sampling_variance` is the finite-population (audit-sampling) variance estimate of the
    lower and upper bound's inverse-inclusion corrections (0 when everything is audited)."""

    original: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    uncertain_pairs: int
    sampling_variance: tuple[float, float] = (0.0, 0.0)


def _keys(states: StateTable, role: RoleOutcomes, i: int) -> list[tuple[str, str | None]]:
    return [(states.question_id[i], a) for a in role.answers[i]]


def shared_label_bounds(
    states: StateTable,
    contrast: LinearContrast,
    low: tuple[Sequence[np.ndarray], Sequence[np.ndarray]],
    high: tuple[Sequence[np.ndarray], Sequence[np.ndarray]],
    inclusion: np.ndarray | None = None,
) -> LabelBounds:
    """Shared-label bounds of a linear contrast's stratum-balanced mean (module doc; search-value
    study, Appendix C, "Shared labels and sample weights").

    `low` and `high` are each role's per-repeat label interval ends (T, S), aligned with
    `states.think.y` / `states.search.y`, which hold the original labels (the point projection).
    A repeat with low == high is fixed at that label; any other is uncertain, and uncertain
    repeats with the same (question, answer) share one label variable. `inclusion` is each
    state's audit inclusion probability (its question's). Returns per-state columns whose
    balanced means (`scores.balanced_mean`) are the original contrast and its bounds: each
    pair's term lives on the first state of its question, and the coefficients sum within a
    question, which sits in one stratum (equal weights), so the columns also bootstrap by
    support component.
    """
    n = len(states)
    w = balanced_weights(states.stratum)
    pi = np.ones(n) if inclusion is None else np.asarray(inclusion, dtype=float)
    original = contrast.const.copy()
    lower = contrast.const.copy()
    upper = contrast.const.copy()
    pair_coef: dict[tuple[str, str | None], float] = {}
    pair_orig: dict[tuple[str, str | None], float] = {}
    pair_state: dict[tuple[str, str | None], int] = {}
    first_of_question: dict[str, int] = {}
    for i in range(n):
        first_of_question.setdefault(states.question_id[i], i)
    for role_idx, (role, alpha) in enumerate(
        ((states.think, contrast.alpha_think), (states.search, contrast.alpha_search))
    ):
        for i in range(n):
            m = len(role.y[i])
            lo, hi = np.asarray(low[role_idx][i], dtype=float), np.asarray(high[role_idx][i], dtype=float)
            for j, key in enumerate(_keys(states, role, i)):
                c = alpha[i] / m
                y0 = float(role.y[i][j])
                original[i] += c * y0
                if lo[j] == hi[j]:
                    fixed = float(lo[j])
                    # a fixed audited label can differ from the original: inverse-inclusion correction
                    lower[i] += c * y0 + (c * fixed - c * y0) / pi[i]
                    upper[i] += c * y0 + (c * fixed - c * y0) / pi[i]
                    continue
                pair_coef[key] = pair_coef.get(key, 0.0) + c * w[i] / w[first_of_question[key[0]]]
                pair_orig[key] = pair_orig.get(key, 0.0) + c * y0 * w[i] / w[first_of_question[key[0]]]
                pair_state.setdefault(key, first_of_question[key[0]])
    var_lo = var_hi = 0.0
    for key, coef in pair_coef.items():
        i = pair_state[key]
        y0_part = pair_orig[key]
        corr_lo, corr_hi = min(0.0, coef) - y0_part, max(0.0, coef) - y0_part
        lower[i] += y0_part + corr_lo / pi[i]
        upper[i] += y0_part + corr_hi / pi[i]
        # Poisson-sampling estimate of Var(Σ w·corr/π) from the audited pairs: Σ (w·corr)² (1 − π)/π²
        factor = (1.0 - pi[i]) / pi[i] ** 2 * w[i] ** 2
        var_lo += factor * corr_lo**2
        var_hi += factor * corr_hi**2
    return LabelBounds(original, lower, upper, len(pair_coef), (var_lo, var_hi))


def label_intervals(
    a: tuple[Sequence[np.ndarray], Sequence[np.ndarray]], b: tuple[Sequence[np.ndarray], Sequence[np.ndarray]]
) -> tuple[tuple[list[np.ndarray], list[np.ndarray]], tuple[list[np.ndarray], list[np.ndarray]]]:
    """Label interval ends from two panels' labels (per role, per state, per repeat): agreed
    labels are fixed ([1, 1] or [0, 0]); a disagreement is [0, 1]."""
    low = tuple([np.minimum(x, y) for x, y in zip(ra, rb)] for ra, rb in zip(a, b))
    high = tuple([np.maximum(x, y) for x, y in zip(ra, rb)] for ra, rb in zip(a, b))
    return low, high  # type: ignore[return-value]


def three_pair_composition(
    p_bx_think: np.ndarray, gain_bx: np.ndarray, gain_ay: np.ndarray, gain_ax: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The B/Y forecast composed from three observed pairs (search-value study, Appendix D,
    "Component composition", Eqs. 7–9):

        p̃_BY,T = p̃_BX,T,   Δ̃_BY = Δ̃_BX + Δ̃_AY − Δ̃_AX,   p̃_BY,S = clip_[0,1](p̃_BY,T + Δ̃_BY).

    Actor A/B, source X/Y: the target pair's THINK (STOP) success comes from the same actor on
    the other source, and its gain adds the source effect seen with actor A to actor B's gain.
    Returns (q_T, q_S) of B/Y.
    """
    q_t = np.asarray(p_bx_think, dtype=float)
    gain = np.asarray(gain_bx, dtype=float) + np.asarray(gain_ay, dtype=float) - np.asarray(gain_ax, dtype=float)
    return q_t, np.clip(q_t + gain, 0.0, 1.0)


def bound_summary(
    bounds: LabelBounds, strata: np.ndarray, samples: dict[str, np.ndarray] | None, interval: Any
) -> dict[str, Any]:
    """The three means, and (with bootstrap samples of the three columns) the interval from the
    lower bound's lower end to the upper bound's upper end."""
    w = balanced_weights(strata)
    out: dict[str, Any] = {
        "original": float(w @ bounds.original),
        "lower": float(w @ bounds.lower),
        "upper": float(w @ bounds.upper),
        "uncertain_pairs": bounds.uncertain_pairs,
        "sampling_se": [float(np.sqrt(bounds.sampling_variance[0])), float(np.sqrt(bounds.sampling_variance[1]))],
    }
    if samples is not None:
        lo = interval(samples["lower"])
        hi = interval(samples["upper"])
        out["interval"] = [lo[0], hi[1]] if lo and hi else None
    else:
        out["interval"] = None
    return out
