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

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from branchpoint.evaluation.value.config import DEFAULT_PRICES, price_key
from branchpoint.validation import router_truths as RT
from branchpoint.validation import seed_truths as S
from branchpoint.validation import truths as T
from branchpoint.validation.canary import CANARY, LEVEL
from branchpoint.validation.study import StudyResult

Kind = Literal["two_sided", "upper_bound", "range", "plug_in", "chi2"]


def at_path(d: Any, path: str) -> Any:
    """The value at a dotted path (a quantity's `estimate` or `interval` in value.json or
    metrics.json); a key may itself hold dots (price keys such as `0.001`): at each level the
    longest run of parts that is a key wins. KeyError naming `path` where nothing is there."""
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


@dataclass(frozen=True)
class Quantity:
    """A compared quantity: its estimate (and interval) path in a study's outputs, its truth,
    and, for one that is compared but not checked, why (`reported`)."""

    name: str
    source: Literal["value", "metrics"]
    estimate: str
    interval: str | None
    truth: Callable[[StudyResult], float]
    kind: Kind = "two_sided"
    reported: str | None = None
    #: the estimator's expected error under the exact model of the study's states, where it is
    #: not 0 by design (a ratio): the bias check tests the error against it, not against 0
    expected_error: Callable[[StudyResult], float] | None = None


#: Why the two kinds that are compared but not checked are not: validation.json says so.
PLUG_IN = "a plug-in with a known finite-sample bias (V̂_Δ low by Var(mean Δ̄), seed 002 appendix): reported"
OPTIMISTIC = "optimistic by design and without an interval: its bias is reported"


def _q(
    name: str,
    est: str,
    ci: str | None,
    truth: Callable[[StudyResult], float],
    kind: Kind = "two_sided",
    source: Literal["value", "metrics"] = "value",
) -> Quantity:
    reported = PLUG_IN if kind == "plug_in" else OPTIMISTIC if (kind == "upper_bound" and ci is None) else None
    return Quantity(name, source, est, ci, truth, kind, reported)


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
    # seed 002's signal routers on the exact forecaster: τ chosen in-sample (no dev rows), so the
    # estimate is the larger of a grid of estimates, optimistic by design (`router_truths`)
    for router in ("confidence:truth", "entropy:truth", "novelty:query", "novelty:document", "evidence_gap"):
        rows.append(
            _q(
                f"U({pk}) {router} (τ in-sample)",
                f"{u}.{router}.utility",
                f"{iv}.{router}",
                functools.partial(RT.signal_router, price=price, pk=pk, router=router),
                "upper_bound",
            )
        )
    if price == 0:
        rows.append(
            _q(
                f"U({pk}) sample-informed",
                f"{u}.sample_informed.utility",
                f"{iv}.sample_informed",
                lambda r: T.sample_informed(r, price),
            )
        )
    rows += _difference_rows(price)
    for cell in T.FACTORIAL:
        # exact where the cell's choice depends on rewards only (every cell at λ = 0)
        if price > 0 and cell in ("fixed_gain_query_cost", "query_gain_query_cost"):
            continue
        path = f"decision_factorial.by_price.{pk}.over_best_constant.{cell}"

        def cell_truth(r: Any, cell: str = cell) -> Any:
            return T.factorial_cell(r, price, pk, cell)

        rows.append(_q(f"factorial({pk}) {cell} − best constant", f"{path}.difference", f"{path}.interval", cell_truth))
    return rows


def _difference_rows(price: float) -> list[Quantity]:
    """Paired router differences against always SEARCH (value.json `router_differences`, seed
    002 §5.4–5.5): truth = the difference of the two routers' truths (`seed_truths`)."""
    pk = price_key(price)
    d = f"router_differences.by_price.{pk}"
    pairs: list[tuple[str, str, Callable[[StudyResult], float]]] = [
        ("always THINK", "always_think", lambda r: T.constant(r, price, "T")),
        ("consistency (two-probe)", "consistency", lambda r: T.consistency(r, price)),
        ("threshold:truth", "threshold:truth", lambda r: T.threshold(r, price, pk)),
    ]
    if price == 0:
        pairs.append(("sample-informed", "sample_informed", lambda r: T.sample_informed(r, price)))
    rows = []
    for label, key, truth in pairs:

        def diff(r: StudyResult, truth: Callable[[StudyResult], float] = truth) -> float:
            return S.router_difference(r, price, truth(r), T.constant(r, price, "S"))

        entry = f"{d}.{key} - always_search"
        rows.append(_q(f"U({pk}) {label} − always SEARCH (paired)", f"{entry}.difference", f"{entry}.interval", diff))
    return rows


#: Seed 002's remaining analyses (`evaluation.value.seed_analyses`): checked where the truth
#: defines them, else not applicable with the reason (`seed_truths.NO_TRUTH`).
SEED_ROWS: list[Quantity] = [
    _q(
        "repeat noise of Δ̄", "gain_spread.noise_variance.value", "gain_spread.noise_variance.interval", S.noise_variance
    ),
    _q("SD of gains", "gain_spread.gain_sd.value", "gain_spread.gain_sd.interval", S.gain_sd, "plug_in"),
    *[
        _q(name, path, None, S.no_truth(name))
        for name, path in (
            ("simultaneous intervals", "simultaneous.families"),
            ("power calculation", "power.contrasts"),
            ("failure rates", "failure_rates.by_role"),
            ("per-stratum panels", "strata_panels.panels"),
        )
    ],
]


QUANTITIES: list[Quantity] = [
    _q("theta (mean Δ²)", "theta", "intervals.theta", lambda r: T.gain_defined(r, T.bal(T.true_delta(r) ** 2, r))),
    _q("mean gain (value.json)", "mean_gain", "intervals.mean_gain", lambda r: T.bal(T.true_delta(r), r)),
    _q("V_Δ", "gain_variance", "intervals.gain_variance", lambda r: T.gain_defined(r, T.v_delta(r))),
    Quantity(
        "R²_Δ truth forecaster",
        "value",
        "gain_r2.truth",
        "intervals.gain_r2.truth",
        lambda r: T.r2_defined(r, 1.0),
        expected_error=T.r2_expected_error,
    ),
    _q(
        "R²_Δ best constant",
        "gain_r2.truth_constant",
        "intervals.gain_r2.truth_constant",
        lambda r: T.r2_defined(r, 0.0),
        "plug_in",
    ),
    _q("gain risk truth", "gain_risk.truth", "intervals.gain_risk.truth", lambda r: T.gain_defined(r, 0.0)),
    _q(
        "gain risk constant",
        "gain_risk.truth_constant",
        "intervals.gain_risk.truth_constant",
        lambda r: T.gain_defined(r, T.v_delta(r)),
    ),
    _q("Brier truth", "brier.truth.brier", "intervals.brier.truth", T.outcome_var),
    # The split's parts have no interval in value.json: each is checked for bias over the studies
    # (a t-test on the errors). The level term of the exact forecaster has truth 0; its estimator
    # (`scores.level_risk`) is unbiased and may be negative, so 0 is no boundary for it.
    _q("Brier truth: level", "brier.truth.level", None, T.zero),
    _q("Brier truth: gain", "brier.truth.gain", None, T.zero),
    _q("Brier truth: variance", "brier.truth.variance", None, T.outcome_var),
    _q(
        "Brier constant",
        "brier.truth_constant.brier",
        "intervals.brier.truth_constant",
        lambda r: T.outcome_var(r) + T.const_level(r) + 0.25 * T.const_gain(r),
    ),
    # the canary forecaster (`canary`): Brier ¼ unless test outcomes reach what forecasters see
    _q(
        "Brier canary",
        f"brier.{CANARY}.brier",
        f"intervals.brier.{CANARY}",
        lambda r: T.canary_brier(r, LEVEL),
    ),
    _q("Brier constant: level", "brier.truth_constant.level", None, T.const_level),
    _q("Brier constant: gain", "brier.truth_constant.gain", None, lambda r: 0.25 * T.const_gain(r)),
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
        lambda r: T.gain_defined(r, T.level_split_truth(r, "gain_quarter")),
    ),
    *[row for price in PRICES for row in _utility_rows(price)],
    # the two-probe router's token accounting against always SEARCH (seed 002 §5.5)
    *[
        _q(
            f"consistency accounting: {key}",
            f"consistency_accounting.{key}.value",
            f"consistency_accounting.{key}.interval",
            functools.partial(RT.consistency_accounting, key=key),
        )
        for key in ("agreement_rate", "success_cost", "tokens_saved", "probe_tokens", "net_tokens_saved")
    ],
    # the plug-in (E|Δ̄| − |EΔ̄|)/2 is optimistic and has no interval (reported, not checked); the
    # study's range from θ̂ is checked through its interval (lower bound's low end to upper's high)
    _q("oracle bound (plug-in)", "utility.oracle_plugin_optimistic", None, T.oracle_h, "upper_bound"),
    _q("oracle range", "oracle_range.upper", "oracle_range.interval", T.oracle_h, "range"),
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
    *SEED_ROWS,
    # the minimal-search study over the forked executions (`minimal`): truth conditional on them
    _q(
        "over-search %",
        "over_search.over_search_pct",
        "over_search.over_search_pct_ci",
        T.over_search,
        source="metrics",
    ),
]
