"""The table of quantities a validation study compares with the simulator's truth.

`QUANTITIES` lists each compared quantity once: where its estimate and interval are in a study's
outputs, how its truth is computed, and how its interval is read:

- `two_sided`: an estimator of the truth; its 95% interval should cover the truth in 0.90-0.99
  of the studies, and its error should average to zero within Monte Carlo error;
- `upper_bound`: an estimator that is optimistic by design (the plug-in oracle utility and
  bound, `scores.oracle_bound`; the best constant chosen in-sample, the larger of two
  estimates): covered when the truth is at most the interval's upper end; its bias is
  reported, not checked;
- `range`: the interval is a range meant to contain the truth (e.g. `oracle_range` of issue
  15, when value.json has it): covered when the truth lies inside it.

- `plug_in`: a consistent estimator with a known finite-sample bias that the seed study accepts
  (R²_Δ of a constant: V̂_Δ = mean θ̂ − (mean Δ̄)² is a plug-in population variance, low by
  Var(mean Δ̄), seed 002 appendix "Gain variance and explained variation"): coverage and bias
  are reported, and not checked.

- `chi2`: the goodness of fit of single-call branches (THINK, STOP) to Binomial(m, p_true) state
  by state, Σ (s − m p)² / (m p (1 − p)) against its degrees of freedom (summed over studies)
  and its exact variance (`compare.pearson_variance`: far above 2 per state where p is near 0
  or 1), which catches a pipeline that shows branches the wrong state even where errors cancel
  on average.

Truths (`truths`) are stratum-balanced means, the functional every estimate in value.json
targets. The comparison itself (`compare.compare_study`) and the checks over many studies
(`compare.aggregate`) read this table; a new quantity is one more row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from branchpoint.evaluation.value.config import DEFAULT_PRICES, price_key
from branchpoint.experiments.validation import truths as T
from branchpoint.experiments.validation.study import StudyResult
from branchpoint.experiments.validation.truths import true_delta

Kind = Literal["two_sided", "upper_bound", "range", "plug_in", "chi2"]


def _get(d: Any, path: str) -> Any:
    """The value at a dotted path; a key may itself hold dots (price keys such as `0.001`): at
    each level the longest run of parts that is a key wins."""
    parts = path.split(".")
    while parts:
        if not isinstance(d, dict):
            raise KeyError(path)
        for n in range(len(parts), 0, -1):
            key = ".".join(parts[:n])
            if key in d:
                d, parts = d[key], parts[n:]
                break
        else:
            raise KeyError(path)
    return d


def _bal(x: np.ndarray, r: StudyResult) -> float:
    return T.bal(x, r)


def _defined(r: StudyResult, value: float) -> float:
    """R²_Δ is defined only where the gain varies over states (V_Δ > 0); NaN otherwise."""
    return value if T.v_delta(r) > 1e-6 else float("nan")


def _gain(r: StudyResult, value: float) -> float:
    """Gain statistics (θ, V_Δ, gain risk) are compared only where the true gain is not zero at
    every state: at Δ ≡ 0 (e.g. `no_search`, whose SEARCH branch cannot search) their truth sits
    on the boundary of the parameter space (θ, V_Δ ≥ 0), where percentile intervals of a skewed
    U-statistic over a few dozen states do not keep their nominal coverage. NaN then."""
    return value if _bal(true_delta(r) ** 2, r) > 1e-6 else float("nan")


def _outcome_var(r: StudyResult) -> float:
    return _bal(0.5 * (r.p_think * (1 - r.p_think) + r.p_search * (1 - r.p_search)), r)


def _constant(r: StudyResult) -> tuple[float, float]:
    return _bal(r.p_think, r), _bal(r.p_search, r)


def _const_level(r: StudyResult) -> float:
    ct, cs = _constant(r)
    return _bal((0.5 * (ct + cs) - 0.5 * (r.p_think + r.p_search)) ** 2, r)


def _const_gain(r: StudyResult) -> float:
    ct, cs = _constant(r)
    return _bal((cs - ct - true_delta(r)) ** 2, r)


def _oracle_h(r: StudyResult) -> float:
    return 0.5 * (_bal(np.abs(true_delta(r)), r) - abs(_bal(true_delta(r), r)))


@dataclass(frozen=True)
class Quantity:
    """A compared quantity: its estimate (and interval) path in a study's outputs and its truth."""

    name: str
    source: Literal["value", "metrics"]
    estimate: str
    interval: str | None
    truth: Callable[[StudyResult], float]
    kind: Kind = "two_sided"


def _q(
    name: str,
    est: str,
    ci: str | None,
    truth: Callable[[StudyResult], float],
    kind: Kind = "two_sided",
    source: Literal["value", "metrics"] = "value",
) -> Quantity:
    return Quantity(name, source, est, ci, truth, kind)


#: The prices of the studies (DESIGN.md: router utility at λ ∈ {0, 0.001, 0.005, 0.01, 0.02}).
PRICES: tuple[float, ...] = DEFAULT_PRICES
LS = "level_split.truth - truth_constant"  # the exact forecaster against the constant at Eℓ*


def _utility_rows(price: float) -> list[Quantity]:
    """Router utilities at one price: U_a = p_a − λ·E[T_a]/1000 (`truths`)."""
    pk = price_key(price)
    u = f"utility.by_price.{pk}"
    iv = f"intervals.utility.{pk}"
    rows = [
        _q(
            f"U({pk}) always THINK",
            f"{u}.always_think.utility",
            f"{iv}.always_think",
            lambda r: T.constant(r, price, "T"),
        ),
        _q(
            f"U({pk}) always SEARCH",
            f"{u}.always_search.utility",
            f"{iv}.always_search",
            lambda r: T.constant(r, price, "S"),
        ),
        _q(
            f"U({pk}) threshold:truth",
            f"{u}.threshold:truth.utility",
            f"{iv}.threshold:truth",
            lambda r: T.threshold(r, price, pk),
        ),
        _q(
            f"U({pk}) consistency (two-probe)",
            f"{u}.consistency.utility",
            f"{iv}.consistency",
            lambda r: T.consistency(r, price),
        ),
        # chosen in-sample (no dev rows): the larger of two estimates, optimistic by design
        _q(
            f"U({pk}) best constant (in-sample)",
            f"{u}.best_constant.utility",
            f"{iv}.best_constant",
            lambda r: T.best_constant(r, price, pk),
            "upper_bound",
        ),
        _q(
            f"U({pk}) oracle (plug-in)",
            f"{u}.oracle.utility",
            f"{iv}.oracle",
            lambda r: T.oracle(r, price),
            "upper_bound",
        ),
    ]
    if price == 0:
        rows.append(
            _q(
                f"U({pk}) sample-informed",
                f"{u}.sample_informed.utility",
                f"{iv}.sample_informed",
                lambda r: T.sample_informed(r, price),
            )
        )
    for cell in T.FACTORIAL:
        # exact where the cell's choice depends on rewards only (every cell at λ = 0)
        if price > 0 and cell in ("fixed_gain_query_cost", "query_gain_query_cost"):
            continue
        path = f"decision_factorial.by_price.{pk}.over_best_constant.{cell}"

        def cell_truth(r: Any, cell: str = cell) -> Any:
            return T.factorial_cell(r, price, pk, cell)

        rows.append(_q(f"factorial({pk}) {cell} − best constant", f"{path}.difference", f"{path}.interval", cell_truth))
    return rows


QUANTITIES: list[Quantity] = [
    _q("theta (mean Δ²)", "theta", "intervals.theta", lambda r: _gain(r, _bal(true_delta(r) ** 2, r))),
    _q("mean gain (value.json)", "mean_gain", "intervals.mean_gain", lambda r: _bal(true_delta(r), r)),
    _q("V_Δ", "gain_variance", "intervals.gain_variance", lambda r: _gain(r, T.v_delta(r))),
    _q("R²_Δ truth forecaster", "gain_r2.truth", "intervals.gain_r2.truth", lambda r: _defined(r, 1.0)),
    _q(
        "R²_Δ best constant",
        "gain_r2.truth_constant",
        "intervals.gain_r2.truth_constant",
        lambda r: _defined(r, 0.0),
        "plug_in",
    ),
    _q("gain risk truth", "gain_risk.truth", "intervals.gain_risk.truth", lambda r: _gain(r, 0.0)),
    _q(
        "gain risk constant",
        "gain_risk.truth_constant",
        "intervals.gain_risk.truth_constant",
        lambda r: _gain(r, T.v_delta(r)),
    ),
    _q("Brier truth", "brier.truth.brier", "intervals.brier.truth", _outcome_var),
    # The split's parts have no interval in value.json: each is checked for bias over the studies
    # (a t-test on the errors). The level term of the exact forecaster has truth 0; its estimator
    # (`scores.level_risk`) is unbiased and may be negative, so 0 is no boundary for it.
    _q("Brier truth: level", "brier.truth.level", None, lambda r: 0.0),
    _q("Brier truth: gain", "brier.truth.gain", None, lambda r: 0.0),
    _q("Brier truth: variance", "brier.truth.variance", None, _outcome_var),
    _q(
        "Brier constant",
        "brier.truth_constant.brier",
        "intervals.brier.truth_constant",
        lambda r: _const_level(r) + 0.25 * _const_gain(r) + _outcome_var(r),
    ),
    _q("Brier constant: level", "brier.truth_constant.level", None, _const_level),
    _q("Brier constant: gain", "brier.truth_constant.gain", None, lambda r: 0.25 * _const_gain(r)),
    # issue 15: the level contrast against a constant level, split into mean bias and variation
    _q(
        "level split: total",
        f"{LS}.level_total.value",
        f"{LS}.level_total.interval",
        lambda r: T.level_split_truth(r, "level_total"),
    ),
    _q(
        "level split: mean bias",
        f"{LS}.level_mean_bias.value",
        f"{LS}.level_mean_bias.interval",
        lambda r: T.level_split_truth(r, "level_mean_bias"),
    ),
    _q(
        "level split: variation",
        f"{LS}.level_variation.value",
        f"{LS}.level_variation.interval",
        lambda r: T.level_split_truth(r, "level_variation"),
    ),
    _q(
        "level split: gain quarter",
        f"{LS}.gain_quarter.value",
        f"{LS}.gain_quarter.interval",
        lambda r: _gain(r, T.level_split_truth(r, "gain_quarter")),
    ),
    *[row for price in PRICES for row in _utility_rows(price)],
    # the plug-in (E|Δ̄| − |EΔ̄|)/2 is optimistic and has no interval (reported, not checked); the
    # study's range from θ̂ is checked through its interval (lower bound's low end to upper's high)
    _q("oracle bound (plug-in)", "utility.oracle_plugin_optimistic", None, _oracle_h, "upper_bound"),
    _q("oracle range", "oracle_range.upper", "oracle_range.interval", _oracle_h, "range"),
    _q(
        "answer accuracy",
        "answer_accuracy",
        "answer_accuracy_ci",
        lambda r: T.natural_mean(r, "p", True),
        source="metrics",
    ),
    _q(
        "abstention accuracy",
        "abstention_accuracy",
        "abstention_accuracy_ci",
        lambda r: T.natural_mean(r, "p", False),
        source="metrics",
    ),
    _q(
        "mean search calls",
        "mean_search_calls",
        "mean_search_calls_ci",
        lambda r: T.natural_mean(r, "searches"),
        source="metrics",
    ),
    _q("TPC", "tpc", "tpc_ci", T.tpc, source="metrics"),
    # the minimal-search study over the forked executions (`minimal`): truth conditional on them
    _q(
        "over-search %",
        "over_search.over_search_pct",
        "over_search.over_search_pct_ci",
        T.over_search,
        source="metrics",
    ),
]
