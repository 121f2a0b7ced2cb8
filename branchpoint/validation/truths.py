"""The truth of every compared quantity, from the simulator's truth of a study (`StudyTruth`).

Each function takes a finished `StudyResult` and returns the stratum-balanced functional its
estimate in value.json or metrics.json targets, over the truth's own states and strata
(`StudyTruth.bal`, never the pipeline's state table or `balanced_mean`). Where a quantity does
not exist in a study by its design (token costs of chat transcripts, which `sim.costs`
does not model; gain statistics where no state has a gain) the function raises `NotApplicable`
with the reason, which validation.json records; a choice that value.json should have made and
did not (τ of a threshold router, the best constant's action, the factorial's fixed terms) is a
`KeyError`: the estimate is missing, and that fails.

Routers at price λ (search-value study §5, `evaluation.value.routers`): U_a = p_a − λ·E[T_a]/1000
per state; a rule's truth is the expectation of its per-state utility given the quantities it
chose (with `--dev-split 0` chosen in-sample and read back from value.json).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from scipy import stats as sps

from branchpoint.evaluation.metrics import MetricsConfig
from branchpoint.validation.study import StudyResult


class NotApplicable(Exception):
    """The quantity does not exist in this study's design (the message says why)."""


NO_COSTS = "token costs of chat transcripts are not modelled (sim/costs.py): priced utilities have no truth"


def pt(r: StudyResult) -> np.ndarray:
    """p_T over the truth's scored states (NotApplicable where there are none)."""
    has_states(r)
    return r.truth.column("p", "T")


def ps(r: StudyResult) -> np.ndarray:
    """p_S over the truth's scored states (NotApplicable where there are none)."""
    has_states(r)
    return r.truth.column("p", "S")


def zero(r: StudyResult) -> float:
    """A truth of 0 (e.g. the exact forecaster's level and gain terms) where states exist."""
    has_states(r)
    return 0.0


def bal(x: np.ndarray, r: StudyResult) -> float:
    return r.truth.bal(np.asarray(x, dtype=float))


def true_delta(r: StudyResult) -> np.ndarray:
    return cast(np.ndarray, ps(r) - pt(r))


def has_states(r: StudyResult) -> None:
    """NotApplicable when no state was forked with both actions (a design without search)."""
    if not r.truth.scored():
        raise NotApplicable("no state has both actions (the design offers no search: forks plan THINK only)")


def v_delta(r: StudyResult) -> float:
    d = true_delta(r)
    return bal(d * d, r) - bal(d, r) ** 2


def utilities(r: StudyResult, price: float) -> tuple[np.ndarray, np.ndarray]:
    """(U_T, U_S) per state at price λ: p − λ·E[T]/1000 (at λ = 0 no tokens are needed)."""
    p_t, p_s = pt(r), ps(r)
    if price == 0:
        return p_t, p_s
    if not r.truth.costs_modelled:
        raise NotApplicable(NO_COSTS)
    return p_t - price * r.truth.column("tokens", "T") / 1000.0, p_s - price * r.truth.column("tokens", "S") / 1000.0


def _router_meta(r: StudyResult, pk: str, router: str) -> dict[str, Any]:
    """What value.json says a router chose at price key `pk` (KeyError: it says nothing)."""
    meta: dict[str, Any] = r.value["utility"]["by_price"][pk][router]
    return meta


def constant(r: StudyResult, price: float, action: str) -> float:
    u_t, u_s = utilities(r, price)
    return bal(u_s if action == "S" else u_t, r)


def best_constant(r: StudyResult, price: float, pk: str) -> float:
    """The truth of the constant action value.json chose (in-sample with no dev rows)."""
    utilities(r, price)
    action = _router_meta(r, pk, "best_constant").get("action")
    if action not in ("search", "think"):
        raise KeyError(f"utility.by_price.{pk}.best_constant.action")
    return constant(r, price, "S" if action == "search" else "T")


def threshold(r: StudyResult, price: float, pk: str, forecaster: str = "truth") -> float:
    """S where the true gain p_S − p_T exceeds the τ value.json chose."""
    u_t, u_s = utilities(r, price)
    tau = _router_meta(r, pk, f"threshold:{forecaster}").get("tau")
    if tau is None:
        raise KeyError(f"utility.by_price.{pk}.threshold:{forecaster}.tau")
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
    probes = 0.0 if price == 0 else price * 2.0 * r.truth.column("tokens", "T") / 1000.0
    a = r.truth.column("agree_think")
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
    ĝ − λĉ/1000 > 0, the other draws score it, so E[U] = P(S)·U_S + (1 − P(S))·U_T, with m the
    branches forked per role (the truth's count, from forks.jsonl). Exact where the choice
    depends on rewards only (query-specific gain with a fixed cost, or both fixed; any rule at
    λ = 0); the query-cost cells at λ > 0 are not compared (`quantities`)."""
    u_t, u_s = utilities(r, price)
    cost = 0.0 if price == 0 else price * float(fixed_cost or 0.0) / 1000.0
    if fixed_gain is not None:
        return bal(np.where(fixed_gain - cost > 0, u_s, u_t), r)
    m_t, m_s, p_t, p_s = r.truth.column("m", "T"), r.truth.column("m", "S"), pt(r), ps(r)
    pick = np.array(
        [
            p_choose_search(float(p_t[i]), float(p_s[i]), int(m_t[i]) // 2, int(m_s[i]) // 2, cost)
            for i in range(len(p_t))
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
    utilities(r, price)
    fixed = r.value["decision_factorial"]["fixed_terms"]
    query_gain, query_cost = FACTORIAL[cell]
    u = split_rule(
        r,
        price,
        fixed_gain=None if query_gain else float(fixed["gain"]),
        fixed_cost=None if query_cost else float(fixed["incremental_tokens"]),
    )
    return u - best_constant(r, price, pk)


def sample_informed(r: StudyResult, price: float) -> float:
    return split_rule(r, price, fixed_gain=None, fixed_cost=None)


# --- gains and levels (search-value study, Appendix B "Levels and gains") ---------------------


def gain_defined(r: StudyResult, value: float) -> float:
    """Gain statistics (θ, V_Δ, gain risk) need a gain somewhere: at Δ ≡ 0 their truth sits on
    the boundary of the parameter space (θ, V_Δ ≥ 0), where percentile intervals of a skewed
    U-statistic over a few dozen states do not keep their nominal coverage."""
    if bal(true_delta(r) ** 2, r) <= 1e-6:
        raise NotApplicable("the true gain is 0 at every state (θ = 0: on the boundary of the parameter space)")
    return value


def r2_defined(r: StudyResult, value: float) -> float:
    """R²_Δ = 1 − L/V_Δ exists only where the gain varies over states (V_Δ > 0)."""
    if v_delta(r) <= 1e-6:
        raise NotApplicable("the true gain does not vary over states (V_Δ = 0): R²_Δ is undefined")
    return value


def r2_expected_error(r: StudyResult) -> float:
    """E[R̂²_Δ] − 1 of the exact forecaster under the exact Binomial model of the study's states:
    the ratio estimator's own finite-sample bias (`dispersion.r2_expected_error`), which its
    bias check allows for."""
    from branchpoint.validation.dispersion import r2_expected_error as expected

    m_t, m_s = r.truth.column("m", "T"), r.truth.column("m", "S")
    return expected(pt(r), ps(r), m_t, m_s, r.truth.strata(), seed=r.seed)[0]


def outcome_var(r: StudyResult) -> float:
    p_t, p_s = pt(r), ps(r)
    return bal(0.5 * (p_t * (1 - p_t) + p_s * (1 - p_s)), r)


def const_level(r: StudyResult) -> float:
    ct, cs = bal(pt(r), r), bal(ps(r), r)
    return bal((0.5 * (ct + cs) - 0.5 * (pt(r) + ps(r))) ** 2, r)


def const_gain(r: StudyResult) -> float:
    ct, cs = bal(pt(r), r), bal(ps(r), r)
    return bal((cs - ct - true_delta(r)) ** 2, r)


def oracle_h(r: StudyResult) -> float:
    d = true_delta(r)
    return 0.5 * (bal(np.abs(d), r) - abs(bal(d, r)))


def level_split_truth(r: StudyResult, part: str) -> float:
    """`level_split["truth - truth_constant"]`: the exact forecaster's level ℓ equals ℓ*, and the
    constant's level ℓ₀ is Eℓ* (both balanced means of the truth), so the mean-bias part is 0 and
    the variation part Var(ℓ) − 2Cov(ℓ, ℓ*) = −Var(ℓ*); the gain part ¼ΔL = ¼(0 − V_Δ)."""
    ell = 0.5 * (pt(r) + ps(r))
    var = bal(ell * ell, r) - bal(ell, r) ** 2
    return {"level_total": -var, "level_mean_bias": 0.0, "level_variation": -var, "gain_quarter": -0.25 * v_delta(r)}[
        part
    ]


def canary_brier(r: StudyResult, level: float) -> float:
    """E[Brier] of a forecaster that says `level` for both actions at every state:
    ½Σ_a [(level − p_a)² + p_a(1 − p_a)] (balanced), exactly 0.25 at level ½ for 0/1 rewards."""
    p_t, p_s = pt(r), ps(r)
    return bal(0.5 * ((level - p_t) ** 2 + p_t * (1 - p_t) + (level - p_s) ** 2 + p_s * (1 - p_s)), r)


# --- the run's own executions (metrics.json) ------------------------------------------------------


def natural_mean(r: StudyResult, what: str, answerable: bool | None = None) -> float:
    vals = [
        getattr(r.truth.natural[q.id], what) for q in r.questions if answerable is None or q.answerable == answerable
    ]
    if not vals:
        raise NotApplicable(f"the run has no {'answerable' if answerable else 'unanswerable'} question")
    return float(np.mean(vals))


def tpc(r: StudyResult, cfg: MetricsConfig | None = None) -> float:
    """Tokens Per Correctness of the run: Σ_q E[g_q + λx_q + μ|S_q|] / Σ_q P(correct_q), the
    ratio of expectations its ratio estimator targets (metrics.tpc, with its weights)."""
    if not r.truth.costs_modelled:
        raise NotApplicable("token costs of chat transcripts are not modelled (sim/costs.py): TPC has no truth")
    cfg = cfg or MetricsConfig()
    cost = correct = 0.0
    for q in r.questions:
        v = r.truth.natural[q.id]
        cost += v.output_tokens + cfg.lam * v.input_tokens + cfg.mu * v.searches
        correct += v.p
    if correct <= 0 or not math.isfinite(cost):
        raise NotApplicable("no execution of the run can be correct: TPC is +inf")
    return cost / correct


def over_search(r: StudyResult) -> float:
    """Over-search % of the forked executions (metrics.json `over_search`): 100 · (Σ k / Σ E[k*] − 1)
    over the correct executions that searched (correct ones without a search add 0 to both
    sums), the ratio of expectations its ratio estimator targets, conditional on the run's
    executions (which are correct is the simulator's own verdict)."""
    if not r.truth.minimal:
        raise NotApplicable("no correct forked execution searched: the over-search % is undefined")
    k = sum(row[0] for row in r.truth.minimal)
    expected = sum(row[1] for row in r.truth.minimal)
    if expected <= 1e-12:
        raise NotApplicable("every first truncation point is right: Σ E[k*] = 0 and the over-search % is +inf")
    return 100.0 * (k / expected - 1.0)
