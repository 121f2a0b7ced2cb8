"""The truth of every compared quantity, from the simulator's exact values of a study's states.

Each function takes a finished `StudyResult` (exact p_T, p_S per state; exact expected tokens
E[T_T], E[T_S] under the completion protocol; the exact expectation of every run execution) and
returns the stratum-balanced functional its estimate in value.json or metrics.json targets. A
truth that needs what the simulator does not give returns NaN, and the quantity is then listed
as skipped for that study (e.g. token costs of chat transcripts, `costs.py`).

Routers at price λ (search-value study §5, `evaluation.value.routers`): U_a = p_a − λ·E[T_a]/1000
per state; a rule's truth is the expectation of its per-state utility given the quantities it
chose on the scored rows (τ of a threshold router, the best constant's action, the factorial's
fixed terms: with `--dev-split 0` they are chosen in-sample and read back from value.json).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats as sps

from branchpoint.evaluation.metrics import MetricsConfig
from branchpoint.evaluation.value.scores import balanced_mean
from branchpoint.experiments.validation.study import StudyResult

NAN = float("nan")


def bal(x: np.ndarray, r: StudyResult) -> float:
    return float(balanced_mean(np.asarray(x, dtype=float), r.states.stratum))


def true_delta(r: StudyResult) -> np.ndarray:
    return r.p_search - r.p_think


def v_delta(r: StudyResult) -> float:
    d = true_delta(r)
    return bal(d * d, r) - bal(d, r) ** 2


def utilities(r: StudyResult, price: float) -> tuple[np.ndarray, np.ndarray]:
    """(U_T, U_S) per state at price λ: p − λ·E[T]/1000 (NaN where tokens are not modelled;
    at λ = 0 no tokens are needed)."""
    if price == 0:
        return r.p_think.astype(float), r.p_search.astype(float)
    return r.p_think - price * r.tokens_think / 1000.0, r.p_search - price * r.tokens_search / 1000.0


def _router_meta(r: StudyResult, pk: str, router: str) -> dict[str, Any]:
    return ((r.value.get("utility") or {}).get("by_price") or {}).get(pk, {}).get(router) or {}


def constant(r: StudyResult, price: float, action: str) -> float:
    u_t, u_s = utilities(r, price)
    return bal(u_s if action == "S" else u_t, r)


def best_constant(r: StudyResult, price: float, pk: str) -> float:
    """The truth of the constant action value.json chose (in-sample with no dev rows)."""
    action = _router_meta(r, pk, "best_constant").get("action")
    if action not in ("search", "think"):
        return NAN
    return constant(r, price, "S" if action == "search" else "T")


def threshold(r: StudyResult, price: float, pk: str, forecaster: str = "truth") -> float:
    """S where the true gain p_S − p_T exceeds the τ value.json chose."""
    tau = _router_meta(r, pk, f"threshold:{forecaster}").get("tau")
    if tau is None:
        return NAN
    u_t, u_s = utilities(r, price)
    return bal(np.where(true_delta(r) > float(tau), u_s, u_t), r)


def oracle(r: StudyResult, price: float) -> float:
    u_t, u_s = utilities(r, price)
    return bal(np.maximum(u_t, u_s), r)


def consistency(r: StudyResult, price: float) -> float:
    """Two-probe consistency (search-value study, Appendix E): two valid THINK answers that agree
    choose THINK, else SEARCH; the choice is scored on other draws and pays both probes:
    U = P(agree)·U_T + (1 − P(agree))·U_S − λ·2E[T_T]/1000 (probes and evaluation draws are
    independent, so the expectation is linear; UNKNOWN and failed probes never agree)."""
    u_t, u_s = utilities(r, price)
    probes = 0.0 if price == 0 else price * 2.0 * r.tokens_think / 1000.0
    a = r.agree_think
    return bal(a * u_t + (1.0 - a) * u_s - probes, r)


def p_choose_search(p_t: float, p_s: float, k_t: int, k_s: int, margin: float) -> float:
    """P(mean of k_S SEARCH draws − mean of k_T THINK draws > margin), 0/1 rewards (Binomials)."""
    a = np.arange(k_t + 1)
    b = np.arange(k_s + 1)
    pa = sps.binom.pmf(a, k_t, p_t)
    pb = sps.binom.pmf(b, k_s, p_s)
    wins = (b[None, :] / k_s - a[:, None] / k_t) > margin + 1e-12
    return float((pa[:, None] * pb[None, :] * wins).sum())


def split_rule(r: StudyResult, price: float, *, fixed_gain: float | None, fixed_cost: float | None) -> float:
    """The truth of `routers.split_rule`: per split ⌊m/2⌋ selection draws per action choose S iff
    ĝ − λĉ/1000 > 0, the other draws score it, so E[U] = P(S)·U_S + (1 − P(S))·U_T. Exact where
    the choice depends on rewards only (query-specific gain with a fixed cost, or both fixed; any
    rule at λ = 0); NaN where it depends on the selection draws' tokens (their distribution, not
    only their mean, would be needed)."""
    if price > 0 and fixed_cost is None:
        return NAN
    cost = 0.0 if price == 0 else price * float(fixed_cost or 0.0) / 1000.0
    u_t, u_s = utilities(r, price)
    if fixed_gain is not None:
        return bal(np.where(fixed_gain - cost > 0, u_s, u_t), r)
    m_t, m_s = r.states.think.m, r.states.search.m
    pick = np.array(
        [
            p_choose_search(float(r.p_think[i]), float(r.p_search[i]), int(m_t[i]) // 2, int(m_s[i]) // 2, cost)
            for i in range(len(r.states))
        ]
    )
    return bal(pick * u_s + (1.0 - pick) * u_t, r)


FACTORIAL = {  # cell -> (query-specific gain, query-specific cost), as `value.study.FACTORIAL_CELLS`
    "fixed_gain_fixed_cost": (False, False),
    "query_gain_fixed_cost": (True, False),
    "fixed_gain_query_cost": (False, True),
    "query_gain_query_cost": (True, True),
}


def factorial_cell(r: StudyResult, price: float, pk: str, cell: str) -> float:
    """The truth of a decision-factorial cell's utility over the best constant (§5.4), with the
    fixed terms value.json chose."""
    fixed = ((r.value.get("decision_factorial") or {}).get("fixed_terms")) or {}
    query_gain, query_cost = FACTORIAL[cell]
    if (not query_gain and fixed.get("gain") is None) or (not query_cost and fixed.get("incremental_tokens") is None):
        return NAN
    u = split_rule(
        r,
        price,
        fixed_gain=None if query_gain else float(fixed["gain"]),
        fixed_cost=None if query_cost else float(fixed["incremental_tokens"]),
    )
    return u - best_constant(r, price, pk)


def sample_informed(r: StudyResult, price: float) -> float:
    return split_rule(r, price, fixed_gain=None, fixed_cost=None)


# --- levels (search-value study, Appendix B "Levels and gains") --------------------------------


def _level(r: StudyResult) -> np.ndarray:
    return 0.5 * (r.p_think + r.p_search)


def level_split_truth(r: StudyResult, part: str) -> float:
    """`level_split["truth - truth_constant"]`: the exact forecaster's level ℓ equals ℓ*, and the
    constant's level ℓ₀ is Eℓ* (both balanced means of the truth), so the mean-bias part is 0 and
    the variation part Var(ℓ) − 2Cov(ℓ, ℓ*) = −Var(ℓ*); the gain part ¼ΔL = ¼(0 − V_Δ)."""
    ell = _level(r)
    var = bal(ell * ell, r) - bal(ell, r) ** 2
    return {"level_total": -var, "level_mean_bias": 0.0, "level_variation": -var, "gain_quarter": -0.25 * v_delta(r)}[
        part
    ]


# --- the run's own executions (metrics.json) ------------------------------------------------------


def natural_mean(r: StudyResult, what: str, answerable: bool | None = None) -> float:
    vals = [getattr(r.natural[q.id], what) for q in r.questions if answerable is None or q.answerable == answerable]
    return float(np.mean(vals)) if vals else NAN


def tpc(r: StudyResult, cfg: MetricsConfig | None = None) -> float:
    """Tokens Per Correctness of the run: Σ_q E[g_q + λx_q + μ|S_q|] / Σ_q P(correct_q), the
    ratio of expectations its ratio estimator targets (metrics.tpc, with its weights)."""
    cfg = cfg or MetricsConfig()
    cost = correct = 0.0
    for q in r.questions:
        v = r.natural[q.id]
        cost += v.output_tokens + cfg.lam * v.input_tokens + cfg.mu * v.searches
        correct += v.p
    return cost / correct if correct > 0 and math.isfinite(cost) else NAN


def over_search(r: StudyResult) -> float:
    """Over-search % of the forked executions (metrics.json `over_search`): 100 · (Σ k / Σ E[k*] − 1)
    over the correct executions that searched (`minimal`: correct ones without a search add 0 to
    both sums), the ratio of expectations its ratio estimator targets, conditional on the run's
    executions; NaN where no correct forked execution searched or Σ E[k*] = 0 (the estimate is
    then +inf)."""
    if not r.minimal:
        return NAN
    k = sum(row[0] for row in r.minimal)
    expected = sum(row[1] for row in r.minimal)
    return 100.0 * (k / expected - 1.0) if expected > 1e-12 else NAN
